package dev.rollcall.config;

import io.quarkus.runtime.configuration.DurationConverter;
import java.time.Duration;
import java.util.Optional;

/** Settings that take a duration or {@code off}: the reaper's and the sweep's intervals. */
public final class Intervals {

  private Intervals() {}

  /** The default of {@code rollcall.reaper-interval}. */
  public static final String REAPER_DEFAULT = "1s";

  /** The reaper's schedule: {@code rollcall.reaper-interval}, or its default. */
  public static final String REAPER_SCHEDULE = "${rollcall.reaper-interval:" + REAPER_DEFAULT + "}";

  /** The default of {@code rollcall.sweep.interval}. */
  public static final String SWEEP_DEFAULT = "5m";

  /** The sweeper's schedule: {@code rollcall.sweep.interval}, or its default. */
  public static final String SWEEP_SCHEDULE = "${rollcall.sweep.interval:" + SWEEP_DEFAULT + "}";

  /** The duration, or empty when the setting is {@code off} (or {@code disabled}). */
  public static Optional<Duration> orOff(String setting) {
    String value = setting.trim();
    if (value.equalsIgnoreCase("off") || value.equalsIgnoreCase("disabled")) {
      return Optional.empty();
    }
    return Optional.of(DurationConverter.parseDuration(value));
  }

  /** The duration of {@code setting}, or of {@code fallback} when the setting is {@code off}. */
  public static Duration orDefault(String setting, String fallback) {
    return orOff(setting).orElseGet(() -> DurationConverter.parseDuration(fallback));
  }
}
