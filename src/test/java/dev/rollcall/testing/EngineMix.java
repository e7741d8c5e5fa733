package dev.rollcall.testing;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;

/**
 * A realistic mix of the engine's runs for benchmarks and the chaos suite, seeded set-based (one
 * statement per table) in the real schema {@link EngineFixture} built for {@link
 * EngineVersion#STABLE}: active runs in a rotation of states, each with the steps, waits, hooks and
 * queue jobs the engine leaves for that state, interleaved by id with terminal runs. The state of
 * each active run is noted in {@code execution_context.seeded} (recovery never reads it), so what a
 * scenario re-drove can be compared with the seeded truth. {@link EngineRuns} seeds single runs
 * with every event byte-exact; this seeds hundreds of thousands in seconds.
 */
public final class EngineMix {

  /** Every state this can seed, and whether a run in it needs a re-drive after a deploy. */
  public static final Map<String, Boolean> STATES = new LinkedHashMap<>();

  static {
    STATES.put("pending", true);
    STATES.put("mid-step", true);
    STATES.put("due-wait", true);
    STATES.put("future-wait-with-job", false); // its delayed wake-up job is in the queue
    STATES.put("future-wait-lost-job", true);
    STATES.put("hook-parked", true);
    STATES.put("lost-wake-up", true);
    STATES.put("job-locked-by-dead-worker", true);
    STATES.put("job-exhausted", true);
  }

  /**
   * The mix of the benchmark against the engine's own recovery: parked on a future wait with its
   * wake job, parked on a hook, mid-step, pending, lost wake-up.
   */
  public static final List<String> DEPLOY_MIX =
      List.of("future-wait-with-job", "hook-parked", "mid-step", "pending", "lost-wake-up");

  /** Every state. */
  public static final List<String> ALL = List.copyOf(STATES.keySet());

  private static final String OLD = "(now() AT TIME ZONE 'UTC') - interval '1 hour'";
  private static final String SEEDED = "r.execution_context->>'seeded'";

  private EngineMix() {}

  /**
   * Empties the engine's tables and its queue, then seeds {@code active} active runs in a rotation
   * of {@code states} and {@code terminalPerActive} terminal runs after each active one (ids {@code
   * wrun_<26 digits>}, in creation order).
   */
  public static void seed(TestDatabase db, int active, int terminalPerActive, List<String> states) {
    for (String s : states) {
      if (!STATES.containsKey(s)) {
        throw new IllegalArgumentException("unknown state " + s);
      }
    }
    int every = terminalPerActive + 1;
    String stateOf =
        "(ARRAY['"
            + String.join("','", states)
            + "'])[1 + (n / "
            + every
            + ") % "
            + states.size()
            + "]";
    db.execute(
        "TRUNCATE workflow.workflow_runs, workflow.workflow_steps, workflow.workflow_waits,"
            + " workflow.workflow_events, workflow.workflow_hooks",
        "DELETE FROM graphile_worker._private_jobs",
        "INSERT INTO workflow.workflow_runs (id, deployment_id, status, name, created_at,"
            + " updated_at, execution_context)"
            + " SELECT 'wrun_' || lpad(n::text, 26, '0'), 'postgres',"
            + " (CASE WHEN n % "
            + every
            + " <> 0 THEN (ARRAY['completed','failed','cancelled'])[1 + n % 3]"
            + "  WHEN "
            + stateOf
            + " = 'pending' THEN 'pending' ELSE 'running' END)::workflow.status,"
            + " 'workflow//./src/workflows/flow' || (n % 5) || '//run', "
            + OLD
            + ", "
            + OLD
            + ", CASE WHEN n % "
            + every
            + " = 0 THEN jsonb_build_object('seeded', "
            + stateOf
            + ") ELSE '{}'::jsonb END"
            + " FROM generate_series(0, "
            + ((long) every * active - 1)
            + ") AS n",
        "INSERT INTO workflow.workflow_steps (run_id, step_id, step_name, status, attempt,"
            + " created_at, updated_at) SELECT r.id, 'step_' || r.id, 'step//charge', 'running', 1, "
            + OLD
            + ", "
            + OLD
            + " FROM workflow.workflow_runs r WHERE "
            + SEEDED
            + " = 'mid-step'",
        "INSERT INTO workflow.workflow_steps (run_id, step_id, step_name, status, attempt,"
            + " created_at, updated_at, completed_at) SELECT r.id, 'step_' || r.id,"
            + " 'step//charge', 'completed', 1, "
            + OLD
            + ", "
            + OLD
            + ", "
            + OLD
            + " FROM workflow.workflow_runs r WHERE "
            + SEEDED
            + " = 'lost-wake-up'",
        // The step's own events, as the engine writes them: a completed step row without its
        // step_completed event is a torn write (docs/torn-runs.md), which a pass mends; without
        // these every lost wake-up of the mix looked torn, and each pass read its run's row again
        // to mend it (0.2 more runs-table rows read per active run than the scan).
        "INSERT INTO workflow.workflow_events (id, type, correlation_id, created_at, run_id,"
            + " spec_version) SELECT 'wevt_' || r.id || '_' || e.n, e.type, 'step_' || r.id, "
            + OLD
            + ", r.id, "
            + EngineVersion.STABLE.specVersion()
            + " FROM workflow.workflow_runs r CROSS JOIN (VALUES (1, 'step_started'),"
            + " (2, 'step_completed')) AS e(n, type) WHERE "
            + SEEDED
            + " = 'lost-wake-up'",
        "INSERT INTO workflow.workflow_waits (wait_id, run_id, status, resume_at, created_at,"
            + " updated_at) SELECT r.id || '-wait', r.id, 'waiting', CASE WHEN "
            + SEEDED
            + " = 'due-wait' THEN "
            + OLD
            + " ELSE (now() AT TIME ZONE 'UTC') + interval '1 hour' END, "
            + OLD
            + ", "
            + OLD
            + " FROM workflow.workflow_runs r WHERE "
            + SEEDED
            + " IN ('due-wait', 'future-wait-with-job', 'future-wait-lost-job')",
        "INSERT INTO workflow.workflow_hooks (run_id, hook_id, token, owner_id, project_id,"
            + " environment, created_at, spec_version, is_webhook)"
            + " SELECT r.id, 'hook_' || r.id, 'tok_' || r.id, '', '', '', "
            + OLD
            + ", "
            + EngineVersion.STABLE.specVersion()
            + ", false FROM workflow.workflow_runs r WHERE "
            + SEEDED
            + " = 'hook-parked'");
    String payload =
        "json_build_object('attempt', 2, 'messageId', 'msg_' || r.id, 'id', r.name, 'data',"
            + " encode(convert_to('{\"runId\":\"' || r.id || '\"}', 'UTF8'), 'base64'))";
    db.execute(
        "SELECT count(graphile_worker.add_job('workflow_flows', "
            + payload
            + ", run_at => now() + interval '1 hour', max_attempts => 3, job_key => 'msg_' ||"
            + " r.id)) FROM workflow.workflow_runs r WHERE "
            + SEEDED
            + " = 'future-wait-with-job'",
        "SELECT count(graphile_worker.add_job('workflow_flows', "
            + payload
            + ", max_attempts => 3, job_key => 'msg_' || r.id)) FROM workflow.workflow_runs r"
            + " WHERE "
            + SEEDED
            + " IN ('job-locked-by-dead-worker', 'job-exhausted')",
        // Planned with statistics of the seeded tables: without them the joins below can become
        // nested loops over every run for every job (minutes at 100 000 runs).
        "ANALYZE workflow.workflow_runs",
        "ANALYZE graphile_worker._private_jobs",
        "UPDATE graphile_worker._private_jobs j SET locked_by = 'worker-dead-bench',"
            + " locked_at = now() - interval '5 hours' FROM workflow.workflow_runs r"
            + " WHERE j.key = 'msg_' || r.id AND "
            + SEEDED
            + " = 'job-locked-by-dead-worker'",
        "UPDATE graphile_worker._private_jobs j SET attempts = max_attempts,"
            + " last_error = 'seeded failure' FROM workflow.workflow_runs r"
            + " WHERE j.key = 'msg_' || r.id AND "
            + SEEDED
            + " = 'job-exhausted'",
        "ANALYZE workflow.workflow_runs",
        "ANALYZE graphile_worker._private_jobs");
  }

  /** Active runs by seeded state. */
  public static Map<String, Long> seededByState(TestDatabase db) {
    return counts(
        db,
        "SELECT execution_context->>'seeded', count(*) FROM workflow.workflow_runs"
            + " WHERE status IN ('pending', 'running') GROUP BY 1");
  }

  /** How many active runs need a re-drive, by the seeded truth. */
  public static long needing(TestDatabase db) {
    return seededByState(db).entrySet().stream()
        .filter(e -> STATES.get(e.getKey()))
        .mapToLong(Map.Entry::getValue)
        .sum();
  }

  /** The highest job id in the queue so far (0 when empty): jobs above it were added later. */
  public static long lastJobId(TestDatabase db) {
    return Long.parseLong(
        db.column("SELECT coalesce(max(id), 0) FROM graphile_worker._private_jobs").get(0));
  }

  /**
   * Workflow jobs added after {@code sinceJobId}, per seeded state of their run: {@code [jobs,
   * distinct runs]}. A job's run is read from its payload as the engine encodes it.
   */
  public static Map<String, long[]> addedByState(TestDatabase db, long sinceJobId) {
    Map<String, long[]> out = new LinkedHashMap<>();
    for (List<String> row :
        db.rows(
            "SELECT coalesce(r.execution_context->>'seeded', 'not an active run'), count(*),"
                + " count(DISTINCT j.run_id) FROM (SELECT convert_from(decode(payload->>'data',"
                + " 'base64'), 'UTF8')::json->>'runId' AS run_id"
                + " FROM graphile_worker._private_jobs WHERE id > ?"
                + " AND task_id = (SELECT id FROM graphile_worker._private_tasks"
                + " WHERE identifier = 'workflow_flows')) j"
                + " LEFT JOIN workflow.workflow_runs r ON r.id = j.run_id GROUP BY 1",
            sinceJobId)) {
      out.put(row.get(0), new long[] {Long.parseLong(row.get(1)), Long.parseLong(row.get(2))});
    }
    return out;
  }

  /** Removes the jobs added after {@code sinceJobId}, so the next scenario starts from the seed. */
  public static void removeAddedJobs(TestDatabase db, long sinceJobId) {
    db.execute("DELETE FROM graphile_worker._private_jobs WHERE id > " + sinceJobId);
  }

  /**
   * Every job of the queue up to {@code upToJobId} as one line each (id, key, run_at, attempts,
   * locked_by, payload): two snapshots are equal when no such job was deleted or re-timed.
   */
  public static List<String> jobsSnapshot(TestDatabase db, long upToJobId) {
    return db.column(
        "SELECT concat_ws(' ', id, key, run_at, attempts, locked_by, payload::text)"
            + " FROM graphile_worker._private_jobs WHERE id <= ? ORDER BY id",
        upToJobId);
  }

  /** Runs-table rows read so far by every backend that has published its statistics. */
  public static long runsRowsRead(TestDatabase db) {
    return Long.parseLong(
        db.column(
                "SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)"
                    + " FROM pg_stat_user_tables WHERE schemaname = 'workflow'"
                    + " AND relname = 'workflow_runs'")
            .get(0));
  }

  private static Map<String, Long> counts(TestDatabase db, String sql) {
    return db.rows(sql).stream()
        .collect(
            Collectors.toMap(
                r -> r.get(0), r -> Long.parseLong(r.get(1)), Long::sum, LinkedHashMap::new));
  }
}
