package dev.rollcall.config;

import io.quarkus.runtime.configuration.DurationConverter;
import java.time.Duration;
import java.util.Optional;

/** Settings that take a duration or {@code off}: the reaper's and the sweep's intervals. */
public final class Intervals {

  private Intervals() {}

  /** The duration, or empty when the setting is {@code off} (or {@code disabled}). */
  public static Optional<Duration> orOff(String setting) {
    String value = setting.trim();
    if (value.equalsIgnoreCase("off") || value.equalsIgnoreCase("disabled")) {
      return Optional.empty();
    }
    return Optional.of(DurationConverter.parseDuration(value));
  }
}
