package dev.rollcall.config;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.Optional;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** Interval settings: a duration or {@code off}, and the defaults the scheduler falls back on. */
@Tag("unit")
class IntervalsTest {

  @Test
  void offAndDisabledSwitchAnIntervalOff() {
    assertEquals(Optional.empty(), Intervals.orOff("off"));
    assertEquals(Optional.empty(), Intervals.orOff(" Disabled "));
    assertEquals(Optional.of(Duration.ofMillis(250)), Intervals.orOff("250ms"));
  }

  @Test
  void anIntervalSwitchedOffCountsAsItsDefaultWhereAPaceMustBeAssumed() {
    assertEquals(Duration.ofSeconds(1), Intervals.orDefault("off", Intervals.REAPER_DEFAULT));
    assertEquals(Duration.ofMinutes(5), Intervals.orDefault("off", Intervals.SWEEP_DEFAULT));
    assertEquals(Duration.ofSeconds(3), Intervals.orDefault("3s", Intervals.REAPER_DEFAULT));
  }

  @Test
  void theSchedulesFallBackOnTheSameDefaultsAsTheConfiguration() {
    assertEquals("${rollcall.reaper-interval:1s}", Intervals.REAPER_SCHEDULE);
    assertEquals("${rollcall.sweep.interval:5m}", Intervals.SWEEP_SCHEDULE);
  }
}
