package dev.rollcall.bench;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

@Tag("unit")
class LoadPairsTest {

  @Test
  void theDifferencesAreTracingOnMinusOffPairByPair() {
    String table =
        LoadPairs.table(
            "tracing",
            "off",
            "on",
            List.of(
                pair(
                    new LoadFigures(2, 10, 3, 30),
                    "",
                    new LoadFigures(3, 14, 3, 20),
                    "9 spans",
                    false),
                pair(
                    new LoadFigures(4, 10, 5, 30),
                    "",
                    new LoadFigures(5, 16, 5, 40),
                    "7 spans",
                    true)));
    assertTrue(table.contains("| pair | first | tracing |"), table);
    assertTrue(table.contains("| 1 | off | on | 3 | 14 | 3 | 20 | 9 spans |"), table);
    assertTrue(table.contains("| 2 | on | off | 4 | 10 | 5 | 30 |  |"), table);
    assertTrue(table.contains("differences, tracing on − off (ms)"), table);
    // heartbeat p50: +1 and +1; heartbeat p99: +4 and +6 (mean +5, sd 1.41, t 12.706: ±12.71).
    assertTrue(
        table.contains("heartbeat p50  n = 2, mean +1.00, 95 % interval +1.00 to +1.00"), table);
    assertTrue(
        table.contains("heartbeat p99  n = 2, mean +5.00, 95 % interval -7.71 to +17.71"), table);
    assertTrue(table.contains("claim p99      n = 2, mean +0.00"), table);
  }

  @Test
  void aBaselineBuildIsThisBuildMinusTheBaseline() {
    String table =
        LoadPairs.table(
            "build",
            "baseline",
            "this",
            List.of(
                pair(
                    new LoadFigures(2, 10, 3, 30),
                    "/a/quarkus-app",
                    new LoadFigures(3, 9, 3, 20),
                    "",
                    false)));
    assertTrue(table.contains("| 1 | baseline | baseline | 2 | 10 | 3 | 30 | /a/quarkus-app |"));
    assertTrue(table.contains("| 1 | baseline | this | 3 | 9 | 3 | 20 |  |"), table);
    assertTrue(table.contains("heartbeat p99  n = 1, -1.00 (no interval from one pair)"), table);
  }

  @Test
  void aBaselineThatIsNoBuildIsRefusedBeforeAnyRun() {
    IllegalArgumentException e =
        assertThrows(
            IllegalArgumentException.class,
            () -> LoadPairs.builds(Path.of("target", "no-such-build"), Path.of("target")));
    assertTrue(e.getMessage().contains("bench.baseline-app"), e.getMessage());
  }

  /** One pair: side A's figures and note, side B's, and whether B ran first. */
  private static LoadPairs.Pair pair(
      LoadFigures a, String aNote, LoadFigures b, String bNote, boolean bFirst) {
    return new LoadPairs.Pair(
        new LoadPairs.Outcome(a, aNote), new LoadPairs.Outcome(b, bNote), bFirst);
  }
}
