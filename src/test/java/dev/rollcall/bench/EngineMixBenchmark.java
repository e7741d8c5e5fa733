package dev.rollcall.bench;

import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.ClaimerSwarm;
import dev.rollcall.testing.ClaimerSwarm.Claimer;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.EngineMix;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import jakarta.inject.Inject;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * A boot epoch over the engine's own schema (built by the package's migrations) holding a realistic
 * mix of run states, with and without the partial index of active runs. Prints verdict counts by
 * reason, runs-table rows read per active run, classification time per page, and the precision and
 * recall of "needs a re-drive" against the seeded truth. Run with {@code ./mvnw -B test -Pbench
 * -Dtest=EngineMixBenchmark} ({@code -Dbench.runs=100000}).
 */
@ServiceTest
@Tag("benchmark")
class EngineMixBenchmark extends ApiTestBase {

  @Inject MeterRegistry meters;

  @Test
  void engineMix() throws Exception {
    int active = Integer.getInteger("bench.runs", 100_000);
    EngineMix.seed(Db.database(), active, 3, EngineMix.ALL);
    long activeRuns =
        Db.number(
            "SELECT count(*) FROM workflow.workflow_runs WHERE status IN ('pending','running')");
    System.out.printf(
        "%nEngine mix benchmark: %d active runs, %d terminal%n", activeRuns, 3L * active);
    Db.update("DROP INDEX IF EXISTS workflow.workflow_runs_rollcall_active");
    Result plain = epoch(activeRuns);
    print("without the partial index", plain, activeRuns);
    Db.update(
        "CREATE INDEX workflow_runs_rollcall_active ON workflow.workflow_runs (id)"
            + " WHERE status IN ('pending', 'running')");
    Db.update("ANALYZE workflow.workflow_runs");
    Result indexed = epoch(activeRuns);
    print("with the partial index", indexed, activeRuns);
    Db.update("DROP INDEX IF EXISTS workflow.workflow_runs_rollcall_active");
  }

  record Result(long epoch, long rowsRead, long wallMs, double pageMeanMs, double pageMaxMs) {}

  private Result epoch(long activeRuns) throws Exception {
    Timer before = meters.find("rollcall.classification").tag("namespace", "engine").timer();
    long countBefore = before == null ? 0 : before.count();
    double totalBefore = before == null ? 0 : before.totalTime(TimeUnit.MILLISECONDS);
    Thread.sleep(11_000); // let every backend publish its table statistics
    long readBefore = rowsRead();
    String deploy = UUID.randomUUID().toString();
    List<Claimer> claimers = new ArrayList<>();
    for (int i = 0; i < 8; i++) {
      claimers.add(new Claimer(api, api.register(SourceTables.ENGINE, deploy, "mix-" + i)));
    }
    ClaimerSwarm.Outcome out = ClaimerSwarm.run(claimers, 500);
    Thread.sleep(11_000);
    long read = rowsRead() - readBefore;
    Timer t = meters.find("rollcall.classification").tag("namespace", "engine").timer();
    long pages = t.count() - countBefore;
    double mean = (t.totalTime(TimeUnit.MILLISECONDS) - totalBefore) / Math.max(1, pages);
    return new Result(
        out.epochs().iterator().next(), read, out.wallMillis(), mean, t.max(TimeUnit.MILLISECONDS));
  }

  private void print(String label, Result r, long activeRuns) {
    System.out.printf(
        "%n  %s: epoch %d ms, %d runs-table rows read (%.2f per active run),"
            + " classification %.1f ms per page (max %.1f)%n",
        label,
        r.wallMs(),
        r.rowsRead(),
        (double) r.rowsRead() / activeRuns,
        r.pageMeanMs(),
        r.pageMaxMs());
    System.out.println("  verdicts by reason (final outcome per run):");
    Db.column(
            "SELECT reason || ' ' || count(*) FROM (SELECT DISTINCT ON (run_id) run_id, reason"
                + " FROM rollcall.ledger WHERE epoch_id = ? ORDER BY run_id, id DESC) v"
                + " GROUP BY reason ORDER BY count(*) DESC",
            r.epoch())
        .forEach(line -> System.out.println("    " + line));
    // Precision and recall of "needs a re-drive" against the seeded truth.
    Set<String> redriven =
        Db.set(
            "SELECT DISTINCT run_id FROM rollcall.ledger WHERE epoch_id = ? AND outcome = 'enqueued'",
            r.epoch());
    Set<String> needed =
        Db.set(
            "SELECT id FROM workflow.workflow_runs WHERE status IN ('pending','running')"
                + " AND execution_context->>'seeded' <> 'future-wait-with-job'");
    long truePositives = redriven.stream().filter(needed::contains).count();
    System.out.printf(
        "  needs a re-drive: precision %.2f %%, recall %.2f %% (%d of %d)%n",
        100.0 * truePositives / Math.max(1, redriven.size()),
        100.0 * truePositives / Math.max(1, needed.size()),
        truePositives,
        needed.size());
  }

  private static long rowsRead() {
    return Db.number(
        "SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) FROM pg_stat_user_tables"
            + " WHERE schemaname = 'workflow' AND relname = 'workflow_runs'");
  }
}
