package dev.rollcall.bench;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

@Tag("unit")
class TracingOverheadTest {

  @Test
  void theDifferencesAreTracingOnMinusOffPairByPair() {
    String table =
        TracingOverhead.table(
            List.of(
                new TracingOverhead.Pair(
                    new LoadFigures(2, 10, 3, 30), new LoadFigures(3, 14, 3, 20), false, "9 spans"),
                new TracingOverhead.Pair(
                    new LoadFigures(4, 10, 5, 30),
                    new LoadFigures(5, 16, 5, 40),
                    true,
                    "7 spans")));
    assertTrue(table.contains("| 1 | off | on | 3 | 14 | 3 | 20 | 9 spans |"), table);
    assertTrue(table.contains("| 2 | on | off | 4 | 10 | 5 | 30 |  |"), table);
    // heartbeat p50: +1 and +1; heartbeat p99: +4 and +6 (mean +5, sd 1.41, t 12.706: ±12.71).
    assertTrue(
        table.contains("heartbeat p50  n = 2, mean +1.00, 95 % interval +1.00 to +1.00"), table);
    assertTrue(
        table.contains("heartbeat p99  n = 2, mean +5.00, 95 % interval -7.71 to +17.71"), table);
    assertTrue(table.contains("claim p99      n = 2, mean +0.00"), table);
  }
}
