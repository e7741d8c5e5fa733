package dev.rollcall.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** When a load run measured its driver, not the service: the rule bench/curve drops points by. */
@Tag("unit")
class DriverLagTest {

  @Test
  void theDriverLagsWhenEitherP99IsOverTheThreshold() {
    assertFalse(DriverLag.lagging(50, 50, 50));
    assertTrue(DriverLag.lagging(51, 0, 50));
    assertTrue(DriverLag.lagging(0, 51, 50));
  }

  @Test
  void withoutClaimersTheHeartbeatsAloneDecide() {
    // No claimers: no claim figure (−1).
    assertFalse(DriverLag.lagging(3, -1, 50));
    assertTrue(DriverLag.lagging(120, -1, 99));
  }

  @Test
  void theThresholdIsFiftyMillisecondsUnlessThePropertySaysOtherwise() {
    assertEquals(50, DriverLag.DEFAULT_MAX_MS);
    assertEquals("bench.max-driver-lag-ms", DriverLag.PROPERTY);
  }

  @Test
  void aLoadRowSaysWhetherItsDriverLaggedAndByWhichThreshold() {
    LoadRow run =
        new LoadRow(1000, 3000, 64, 30, 333.3, 3, 26, 4, 40, 2.5, 0.4, 0.3, 0.6, 12, 80, 0, 0, 310);
    ResultsFile.Row lagged = run.row(50);
    assertTrue(lagged.header().startsWith("instances,heartbeat_ms,claimers,seconds,beats_per_s,"));
    assertTrue(lagged.header().endsWith(",max_driver_lag_ms,driver_lagging"), lagged.header());
    assertEquals(
        "1000,3000,64,30,333.3,3,26,4,40,2.5,0.4,0.3,0.6,12,80,0,0,310,50,true", lagged.line());
    assertTrue(run.row(100).line().endsWith(",100,false"));
  }
}
