package dev.rollcall.bench;

import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.ClaimerSwarm;
import dev.rollcall.testing.ClaimerSwarm.Claimer;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.RollcallTestResource;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Prints the figures of one boot epoch: wall time with concurrent claimers, and rows of the runs
 * table read per active run (from {@code pg_stat_user_tables}). Not part of the test suite; run it
 * with {@code ./mvnw -B test -Pbench}. Sizes: {@code -Dbench.runs=100000 -Dbench.terminal=100000
 * -Dbench.claimers=16 -Dbench.batch=500}.
 */
@ServiceTest
@Tag("benchmark")
class EpochBenchmark extends ApiTestBase {

  @Test
  void oneBootEpoch() throws Exception {
    int active = Integer.getInteger("bench.runs", 100_000);
    int terminal = Integer.getInteger("bench.terminal", 100_000);
    int claimerCount = Integer.getInteger("bench.claimers", 16);
    int batch = Integer.getInteger("bench.batch", 500);
    String table = SourceTables.table(SourceTables.BENCH);
    Db.update("TRUNCATE " + table);
    SourceTables.insertRuns(
        RollcallTestResource.database(), SourceTables.BENCH, 1, active, terminal);
    Db.update("ANALYZE " + table);
    long activeRuns =
        Db.number("SELECT count(*) FROM " + table + " WHERE status IN ('pending','running')");

    waitForStatistics();
    long readBefore = rowsRead(table);
    String deploy = UUID.randomUUID().toString();
    List<Claimer> claimers = new ArrayList<>();
    for (int i = 0; i < claimerCount; i++) {
      claimers.add(new Claimer(api, api.register(SourceTables.BENCH, deploy, "bench-" + i)));
    }

    ClaimerSwarm.Outcome out = ClaimerSwarm.run(claimers, batch);

    waitForStatistics();
    long read = rowsRead(table) - readBefore;
    long epoch = out.epochs().iterator().next();
    long epochMillis =
        Db.number(
            "SELECT (extract(epoch FROM closed_at - created_at) * 1000)::bigint"
                + " FROM rollcall.epochs WHERE id = ?",
            epoch);
    long handOuts = Db.number("SELECT count(*) FROM rollcall.ledger WHERE epoch_id = ?", epoch);
    System.out.printf(
        "%nRollcall boot epoch benchmark%n"
            + "  runs table rows            %d (%d active)%n"
            + "  claimers / batch size      %d / %d%n"
            + "  batches                    %d%n"
            + "  epoch wall time            %d ms (created → closed, database clock)%n"
            + "  swarm wall time            %d ms (first claim → every claimer told done)%n"
            + "  runs handed out            %d (%.2f hand-outs per run)%n"
            + "  runs-table rows read       %d (%.2f per active run)%n%n",
        activeRuns + terminal,
        activeRuns,
        claimerCount,
        batch,
        out.batches(),
        epochMillis,
        out.wallMillis(),
        out.handedOut().size(),
        (double) handOuts / out.handedOut().size(),
        read,
        (double) read / activeRuns);
  }

  /** Sequential and index fetches of the table, as the statistics collector counted them. */
  static long rowsRead(String table) {
    String[] parts = table.split("\\.");
    return Db.number(
        "SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) FROM pg_stat_user_tables"
            + " WHERE schemaname = ? AND relname = ?",
        parts[0],
        parts[1]);
  }

  /** An idle backend publishes its counters at the latest 10 s after its last transaction. */
  static void waitForStatistics() throws InterruptedException {
    Thread.sleep(11_000);
  }
}
