package dev.rollcall.registry;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * A heartbeat's {@code recheckAfterMs}: one reaper interval and the margin after a peer's lease
 * runs out, and never sooner than a quarter interval.
 */
@Tag("unit")
class RecheckAfterTest {

  @ParameterizedTest(name = "peer expires in {0} ms, reaper every {1} ms -> {2} ms")
  @CsvSource({
    // peer expires in, reaper interval, recheck after
    "5000, 1000, 6100",
    "0, 1000, 1100",
    "-900, 1000, 250",
    "-1000, 1000, 250",
    "-850, 1000, 250",
    "-800, 1000, 300",
    "-5000, 1000, 250",
    "2000, 250, 2350",
    "-400, 250, 62",
  })
  void recheckAfterTheTakeoverShouldBeOpen(long peerExpiresInMs, long reaperMs, long expected) {
    assertEquals(
        expected,
        Heartbeats.recheckAfterMs(peerExpiresInMs, reaperMs),
        "margin " + Heartbeats.RECHECK_MARGIN.toMillis() + " ms");
  }
}
