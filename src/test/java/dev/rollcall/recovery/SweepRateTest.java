package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** A sweep scans at most {@code max-runs-per-second} times its age; other passes are unlimited. */
@Tag("unit")
class SweepRateTest {

  @ParameterizedTest(name = "{0}: {1}/s, {2} ms old, {3} scanned, asks {4} -> {5}")
  @CsvSource({
    // kind, per second, age ms, scanned, asked, allowed
    "SWEEP, 100, 1000, 0, 500, 100",
    "SWEEP, 100, 1000, 60, 500, 40",
    "SWEEP, 100, 1000, 100, 500, 0",
    "SWEEP, 100, 1000, 150, 500, 0",
    "SWEEP, 100, 10000, 0, 500, 500",
    "SWEEP, 100, 2500, 200, 500, 50",
    // A sweep younger than a millisecond counts as one millisecond old.
    "SWEEP, 5000, 0, 0, 500, 5",
    "SWEEP, 5000, -3, 0, 500, 5",
    "BOOT, 100, 0, 1000000, 500, 500",
    "TAKEOVER, 100, 0, 1000000, 500, 500",
  })
  void aSweepReadsNoFasterThanItsRate(
      EpochKind kind, long perSecond, long ageMs, long scanned, int asked, int allowed) {
    assertEquals(allowed, SweepRate.allowed(kind, perSecond, ageMs, scanned, asked));
  }
}
