package dev.rollcall.bench;

import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.ClaimerSwarm;
import dev.rollcall.testing.ClaimerSwarm.Claimer;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import jakarta.inject.Inject;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
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

  /** The seeded states, each a slice of the active runs, and whether it needs a re-drive. */
  static final Map<String, Boolean> STATES = new LinkedHashMap<>();

  static {
    STATES.put("pending", true);
    STATES.put("mid-step", true);
    STATES.put("due-wait", true);
    STATES.put("future-wait-with-job", false);
    STATES.put("future-wait-lost-job", true);
    STATES.put("hook-parked", true);
    STATES.put("lost-wake-up", true);
    STATES.put("job-locked-by-dead-worker", true);
    STATES.put("job-exhausted", true);
  }

  @Test
  void engineMix() throws Exception {
    int active = Integer.getInteger("bench.runs", 100_000);
    seed(active);
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

  /**
   * Seeds {@code active} active runs in a mix of states (the state is noted in {@code
   * execution_context.seeded}, which a scan never reads) and 3 × as many terminal ones, interleaved
   * by id, with their steps, waits and queue jobs.
   */
  private static void seed(int active) {
    Db.update(
        "TRUNCATE workflow.workflow_runs, workflow.workflow_steps, workflow.workflow_waits,"
            + " workflow.workflow_events, workflow.workflow_hooks");
    Db.update("DELETE FROM graphile_worker._private_jobs");
    String old = "(now() AT TIME ZONE 'UTC') - interval '1 hour'";
    int states = STATES.size();
    List<String> names = new ArrayList<>(STATES.keySet());
    StringBuilder stateOf = new StringBuilder("(ARRAY[");
    for (int i = 0; i < states; i++) {
      stateOf.append(i == 0 ? "" : ",").append("'").append(names.get(i)).append("'");
    }
    stateOf.append("])[1 + (n / 4) % ").append(states).append("]");
    // Every fourth run is active; the others are terminal.
    Db.update(
        "INSERT INTO workflow.workflow_runs (id, deployment_id, status, name, created_at,"
            + " updated_at, execution_context)"
            + " SELECT 'wrun_' || lpad(n::text, 26, '0'), 'postgres',"
            + " (CASE WHEN n % 4 <> 0 THEN 'completed'"
            + "  WHEN "
            + stateOf
            + " = 'pending' THEN 'pending' ELSE 'running' END)::workflow.status,"
            + " 'flow' || (n % 5), "
            + old
            + ", "
            + old
            + ", CASE WHEN n % 4 = 0 THEN jsonb_build_object('seeded', "
            + stateOf
            + ") ELSE '{}'::jsonb END"
            + " FROM generate_series(1, "
            + (4 * active)
            + ") AS n");
    String of = "FROM workflow.workflow_runs r WHERE r.execution_context->>'seeded' = ";
    Db.update(
        "INSERT INTO workflow.workflow_steps (run_id, step_id, step_name, status, attempt,"
            + " created_at, updated_at) SELECT r.id, 'step_' || r.id, 's', 'running', 1, "
            + old
            + ", "
            + old
            + " "
            + of
            + "'mid-step'");
    Db.update(
        "INSERT INTO workflow.workflow_waits (wait_id, run_id, status, resume_at, created_at,"
            + " updated_at) SELECT 'wait_' || r.id, r.id, 'waiting', CASE"
            + " WHEN r.execution_context->>'seeded' = 'due-wait' THEN "
            + old
            + " ELSE (now() AT TIME ZONE 'UTC') + interval '1 hour' END, "
            + old
            + ", "
            + old
            + " "
            + "FROM workflow.workflow_runs r WHERE r.execution_context->>'seeded' IN"
            + " ('due-wait', 'future-wait-with-job', 'future-wait-lost-job')");
    String payload =
        "json_build_object('id', r.name, 'data', encode(convert_to('{\"runId\":\"' || r.id"
            + " || '\"}', 'UTF8'), 'base64'), 'attempt', 1, 'messageId', 'msg_' || r.id)";
    Db.column(
        "SELECT count(graphile_worker.add_job('workflow_flows', "
            + payload
            + ", run_at => now() + interval '1 hour', max_attempts => 3)) "
            + of
            + "'future-wait-with-job'");
    Db.column(
        "SELECT count(graphile_worker.add_job('workflow_flows', "
            + payload
            + ", max_attempts => 3)) "
            + "FROM workflow.workflow_runs r WHERE r.execution_context->>'seeded' IN"
            + " ('job-locked-by-dead-worker', 'job-exhausted')");
    Db.update(
        "UPDATE graphile_worker._private_jobs j SET locked_by = 'worker-dead-bench',"
            + " locked_at = now() FROM workflow.workflow_runs r WHERE j.payload->>'messageId'"
            + " = 'msg_' || r.id AND r.execution_context->>'seeded' = 'job-locked-by-dead-worker'");
    Db.update(
        "UPDATE graphile_worker._private_jobs j SET attempts = max_attempts"
            + " FROM workflow.workflow_runs r WHERE j.payload->>'messageId'"
            + " = 'msg_' || r.id AND r.execution_context->>'seeded' = 'job-exhausted'");
    Db.update("ANALYZE workflow.workflow_runs");
  }
}
