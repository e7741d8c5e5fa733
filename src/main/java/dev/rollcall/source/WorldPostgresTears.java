package dev.rollcall.source;

import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import io.vertx.core.buffer.Buffer;
import io.vertx.mutiny.sqlclient.Row;
import io.vertx.mutiny.sqlclient.SqlClient;
import io.vertx.mutiny.sqlclient.Tuple;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;

/**
 * Finds and mends the writes {@code @workflow/world-postgres} tore: the engine writes some state
 * changes as two statements that are not one transaction (the entity row, then its event), so a
 * process killed between the two leaves a row the event log does not explain, and the runtime's
 * replay cannot go on (docs/torn-runs.md lists every such write of each engine line and why these
 * four are the ones that strand a run):
 *
 * <ul>
 *   <li>{@code step_completed}: the step row {@code completed}, its output written, no event.
 *       Rolled forward: the event is written from the row, so the replay takes the step's known
 *       result and the step's body does not run again.
 *   <li>{@code step_failed}: the row {@code failed} with its error, no event. Rolled forward from
 *       the row when the row holds the serialized error the 5.0 line's event carries; rolled back
 *       (the row {@code running} again, so the step runs again, as a retry would) for the 4.x line,
 *       whose row keeps a re-shaped error the event cannot be rebuilt from.
 *   <li>{@code wait_created}: the wait row inserted, no event. Rolled back (the row deleted): the
 *       replay creates the wait again, row and event, exactly as the engine writes them.
 *   <li>{@code wait_completed}: the wait row {@code completed}, no event. Rolled back (the row
 *       {@code waiting} again): the replay completes it again, row and event.
 * </ul>
 *
 * <p>The caller decides which runs may be mended (their owner is dead or gone, and no live instance
 * executes them) and runs this inside its transaction. Each probe reads the given runs' rows by the
 * {@code run_id} indexes and their events by the {@code correlation_id} index, and locks the torn
 * rows ({@code FOR UPDATE}); every write is guarded by the state it was found in. Only active runs
 * are touched, and only steps whose {@code step_started} is in the log (a legacy run written before
 * the event log is never "mended").
 */
final class WorldPostgresTears {

  private final String engine;
  private final String[] wakeTasks;
  private final String stepsTask;

  /**
   * @param quotedSchema the engine's schema, quoted
   * @param wakeTasks the queue tasks whose jobs deliver a run's messages
   * @param stepsTask the one of them that carries only step messages (the 4.x line's)
   */
  WorldPostgresTears(String quotedSchema, String[] wakeTasks, String stepsTask) {
    this.engine = quotedSchema;
    this.wakeTasks = wakeTasks.clone();
    this.stepsTask = stepsTask;
  }

  /** The torn writes of these runs, mended; empty when there are none (the usual answer). */
  Uni<List<Mend>> mend(SqlClient client, Collection<String> runIds) {
    if (runIds.isEmpty()) {
      return Uni.createFrom().item(List.of());
    }
    String[] ids = runIds.toArray(String[]::new);
    return lockRuns(client, ids)
        .chain(
            () -> client.preparedQuery(tornStepsSql(false, true)).execute(Tuple.of((Object) ids)))
        .chain(steps -> each(client, steps, this::mendStep))
        .chain(
            mended ->
                client
                    .preparedQuery(tornWaitsSql(false, true))
                    .execute(Tuple.of((Object) ids))
                    .chain(waits -> each(client, waits, this::mendWait))
                    .map(more -> concat(mended, more)));
  }

  /**
   * The torn writes of these runs that no live delivery can be making, mended: a takeover's, for
   * the runs the dead instance held, inside the transaction that released its queue locks. A live
   * instance may execute some of them too (a peer runs a sibling step of a {@code Promise.all}, or
   * took the run up a moment ago), and a live process's write half-way through looks just like a
   * tear. Every torn write is made inside a delivery, which holds its queue job locked from before
   * its first write until after its last, and the engine refuses to start a step whose row is
   * terminal. So, read in the same snapshot as the torn rows (a second statement could see a writer
   * that was half-way through as finished and gone):
   *
   * <ul>
   *   <li>a run none of whose jobs is locked (the dead instance's were unlocked in this very
   *       transaction) has no live writer: every torn write of it is mended, whoever reports it;
   *   <li>in a run with a locked job, only steps: every start since the step's last retry that
   *       names an inline owner (the 5.0 line stamps the delivering message's id) names one of the
   *       dead instance's {@code deliveries}, and if a start names none (a step's own message:
   *       every 4.x step, a 5.0 {@code Promise.all} step), no locked job names the step (a step
   *       task's job whose step cannot be read names every step of its run). A wait, written by any
   *       delivery of its run, waits for the takeover's re-check.
   * </ul>
   */
  Uni<List<Mend>> mendUndelivered(
      SqlClient client, Collection<String> runIds, DeadDeliveries deliveries) {
    if (runIds.isEmpty()) {
      return Uni.createFrom().item(List.of());
    }
    String[] ids = runIds.toArray(String[]::new);
    String[] owners = deliveries.messageIds().toArray(String[]::new);
    return lockRuns(client, ids)
        .chain(
            () ->
                client
                    .preparedQuery(lockedJobs(3) + tornStepsSql(true, true))
                    .execute(Tuple.of(ids, owners, wakeTasks, stepsTask)))
        .chain(steps -> each(client, steps, this::mendStep))
        .chain(
            mended ->
                client
                    .preparedQuery(lockedJobs(2) + tornWaitsSql(true, true))
                    .execute(Tuple.of(ids, wakeTasks, stepsTask))
                    .chain(waits -> each(client, waits, this::mendWait))
                    .map(more -> concat(mended, more)));
  }

  /**
   * The queue's deliveries under way, as a {@code locked} CTE of the statement that follows (so in
   * its snapshot): the run and the step (of a step message; {@code '*'} for a step task's job whose
   * step cannot be read) of every locked job of the wake tasks (parameter {@code $n}; the step task
   * {@code $n+1}). graphile-worker keeps no index on the lock columns: this reads the queue's jobs
   * once, as the takeover's classification does.
   */
  private static String lockedJobs(int n) {
    return "WITH locked AS MATERIALIZED (SELECT rollcall.engine_job_run_id(j.payload) AS run_id,"
        + " coalesce(rollcall.engine_job_step_id(j.payload),"
        + "   CASE WHEN t.identifier = $"
        + (n + 1)
        + " THEN '*' END) AS step_id"
        + " FROM graphile_worker._private_jobs j"
        + " JOIN graphile_worker._private_tasks t ON t.id = j.task_id"
        + " WHERE j.locked_by IS NOT NULL AND t.identifier = ANY($"
        + n
        + "::text[])) ";
  }

  /**
   * Those of these runs with a torn write, found as {@link #mend} finds them but neither locked nor
   * mended: a re-check holds back a torn run it could not mend yet rather than wake it into a
   * replay that cannot go on.
   */
  Uni<java.util.Set<String>> tornIn(SqlClient client, Collection<String> runIds) {
    if (runIds.isEmpty()) {
      return Uni.createFrom().item(java.util.Set.of());
    }
    return client
        .preparedQuery(
            "SELECT a.run_id FROM ("
                + tornStepsSql(false, false)
                + ") a UNION SELECT b.run_id FROM ("
                + tornWaitsSql(false, false)
                + ") b")
        .execute(Tuple.of((Object) runIds.toArray(String[]::new)))
        .map(
            rows -> {
              java.util.Set<String> runs = new java.util.HashSet<>();
              rows.forEach(r -> runs.add(r.getString("run_id")));
              return runs;
            });
  }

  private Uni<Void> lockRuns(SqlClient client, String[] ids) {
    // One mender of a run at a time, until its transaction ends: a takeover and a pass may hold
    // the same run. Taken in one order (no deadlock between menders), and before the probes, which
    // then read with a snapshot taken after an earlier mender committed. Without it the second
    // would wait for the row lock, then still see no event (its snapshot is older) and write one
    // again: FOR UPDATE re-checks a locked row, not the NOT EXISTS beside it.
    return client
        .preparedQuery(
            "SELECT count(pg_advisory_xact_lock(hashtext('rollcall.mend.' || u.run_id)))"
                + " FROM (SELECT DISTINCT r AS run_id FROM unnest($1::text[]) AS r ORDER BY 1) u")
        .execute(Tuple.of((Object) ids))
        .replaceWithVoid();
  }

  /**
   * Terminal step rows of active runs whose terminal event is missing while their {@code
   * step_started} is in the log, locked; with what the event needs: the step's name, the run's
   * workflow name, the row's output or error, the spec version of the step's latest start (the
   * process that tore the write wrote that one), the run's newest event id and the database's time.
   * {@code undelivered}: only those no live delivery can be writing, read beside the {@link
   * #lockedJobs} CTE, the dead deliveries' message ids in $2 (see {@link #mendUndelivered}).
   */
  String tornStepsSql(boolean undelivered, boolean lock) {
    // The id of the step's last step_retrying ('' when none): starts before it are over.
    String sinceRetry =
        " AND o.id > coalesce((SELECT max(rt.id) FROM "
            + engine
            + ".workflow_events rt WHERE rt.correlation_id = s.step_id"
            + " AND rt.run_id = s.run_id AND rt.type = 'step_retrying'), '')";
    String starts =
        "SELECT 1 FROM "
            + engine
            + ".workflow_events o WHERE o.correlation_id = s.step_id AND o.run_id = s.run_id"
            + " AND o.type = 'step_started'"
            + sinceRetry;
    // The steps found torn first, in a subquery the planner keeps apart (OFFSET 0), and only then
    // their runs: joined before the anti-join, every completed step of a hand-out read its run's
    // row again, torn or not (0.2 more runs rows read per active run in the benchmark's mix).
    return "SELECT s.run_id, s.step_id, s.step_name, s.status::text AS status, s.output_cbor,"
        + " s.error_cbor, r.name AS workflow_name, st.spec_version,"
        + " (SELECT max(e.id) FROM "
        + engine
        + ".workflow_events e WHERE e.run_id = s.run_id) AS last_event_id,"
        + " (extract(epoch FROM now()) * 1000)::bigint AS now_ms"
        + " FROM (SELECT s.* FROM "
        + engine
        + ".workflow_steps s"
        + " WHERE s.run_id = ANY($1::text[]) AND s.status IN ('completed', 'failed')"
        + " AND NOT EXISTS (SELECT 1 FROM "
        + engine
        + ".workflow_events e WHERE e.correlation_id = s.step_id AND e.run_id = s.run_id"
        + "   AND e.type IN ('step_completed', 'step_failed'))"
        // Races with live writers, decided in this one snapshot: a writer half-way through holds
        // its job locked, so a run with no locked job has none; else a start that names another
        // owner than the dead deliveries ($2) is a live process's, and a start that names none
        // may be that of the delivery of any locked job that names the step. A mend beside a live
        // writer writes the event twice, and the runtime fails a run whose log completes a step
        // twice.
        + (undelivered
            ? " AND (NOT EXISTS (SELECT 1 FROM locked l WHERE l.run_id = s.run_id)"
                + "  OR (NOT EXISTS ("
                + starts
                + "      AND rollcall.cbor_text(o.payload_cbor, 'ownerMessageId') <> ALL($2::text[]))"
                + "    AND (NOT EXISTS ("
                + starts
                + "        AND rollcall.cbor_text(o.payload_cbor, 'ownerMessageId') IS NULL)"
                + "      OR NOT EXISTS (SELECT 1 FROM locked l WHERE l.run_id = s.run_id"
                + "        AND l.step_id IN (s.step_id, '*')))))"
            : "")
        // Locked in one order (the lock reaches into the subquery), as concurrent mends need.
        + " ORDER BY s.run_id, s.step_id OFFSET 0) s JOIN "
        + engine
        + ".workflow_runs r ON r.id = s.run_id"
        + " JOIN LATERAL (SELECT e.spec_version FROM "
        + engine
        + ".workflow_events e WHERE e.correlation_id = s.step_id AND e.run_id = s.run_id"
        + "   AND e.type = 'step_started' ORDER BY e.id DESC LIMIT 1) st ON true"
        + " WHERE r.status IN ('pending', 'running')"
        + (lock ? " ORDER BY s.run_id, s.step_id FOR UPDATE OF s" : "");
  }

  /**
   * Wait rows of active runs that the log does not explain, locked: a waiting wait without its
   * {@code wait_created}, a completed one without its {@code wait_completed}. A wait's id is its
   * run's id, a dash and the correlation id of its events. {@code undelivered}: only those of runs
   * with no locked job in the {@link #lockedJobs} CTE (any delivery of a run may write its waits).
   */
  private String tornWaitsSql(boolean undelivered, boolean lock) {
    // As the steps' query: the torn waits first, then their runs (tornStepsSql).
    return "SELECT w.run_id, w.wait_id, w.status::text AS status,"
        + " substr(w.wait_id, length(w.run_id) + 2) AS correlation_id"
        + " FROM (SELECT w.* FROM "
        + engine
        + ".workflow_waits w WHERE w.run_id = ANY($1::text[])"
        + " AND NOT EXISTS (SELECT 1 FROM "
        + engine
        + ".workflow_events e WHERE e.correlation_id = substr(w.wait_id, length(w.run_id) + 2)"
        + "   AND e.run_id = w.run_id"
        + "   AND e.type = CASE w.status::text WHEN 'waiting' THEN 'wait_created'"
        + "     ELSE 'wait_completed' END)"
        + (undelivered
            ? " AND NOT EXISTS (SELECT 1 FROM locked l WHERE l.run_id = w.run_id)"
                // $2 is the step query's; named here too so that both take one tuple.
                + " AND cardinality($2::text[]) >= 0"
            : "")
        + " ORDER BY w.run_id, w.wait_id OFFSET 0) w JOIN "
        + engine
        + ".workflow_runs r ON r.id = w.run_id WHERE r.status IN ('pending', 'running')"
        + (lock ? " ORDER BY w.run_id, w.wait_id FOR UPDATE OF w" : "");
  }

  private Uni<Mend> mendStep(SqlClient client, Row row) {
    String runId = row.getString("run_id");
    String stepId = row.getString("step_id");
    String stepName = row.getString("step_name");
    boolean completed = "completed".equals(row.getString("status"));
    String write = completed ? "step_completed" : "step_failed";
    String evidence =
        "step "
            + stepId
            + " ("
            + stepName
            + ") is "
            + row.getString("status")
            + " in workflow_steps, its step_started is in the log, its "
            + write
            + " is not";
    byte[] error = bytes(row, "error_cbor");
    if (!completed && !EngineEvents.serializedError(error)) {
      return client
          .preparedQuery(
              "UPDATE "
                  + engine
                  + ".workflow_steps SET status = 'running', error_cbor = NULL,"
                  + " completed_at = NULL WHERE step_id = $1 AND run_id = $2 AND status = 'failed'")
          .execute(Tuple.of(stepId, runId))
          .map(
              done ->
                  new Mend(
                      runId,
                      write,
                      stepId,
                      evidence
                          + "; rolled back: the row is running again, so the step runs again"
                          + " (its error is not in a form its event can be rebuilt from)"));
    }
    byte[] data =
        completed
            ? EngineEvents.stepCompleted(
                stepName, row.getString("workflow_name"), bytes(row, "output_cbor"))
            : EngineEvents.stepFailed(stepName, error);
    String eventId =
        EngineEvents.eventIdAfter(row.getString("last_event_id"), row.getLong("now_ms"));
    return client
        .preparedQuery(
            "INSERT INTO "
                + engine
                + ".workflow_events (id, type, correlation_id, run_id, payload_cbor, spec_version)"
                + " VALUES ($1, $2, $3, $4, $5, $6)")
        .execute(
            Tuple.of(
                eventId, write, stepId, runId, Buffer.buffer(data), row.getInteger("spec_version")))
        .map(
            done ->
                new Mend(
                    runId,
                    write,
                    stepId,
                    evidence
                        + "; rolled forward: wrote "
                        + write
                        + " "
                        + eventId
                        + " from the row ("
                        + data.length
                        + " bytes of event data)"));
  }

  private Uni<Mend> mendWait(SqlClient client, Row row) {
    String runId = row.getString("run_id");
    String waitId = row.getString("wait_id");
    boolean waiting = "waiting".equals(row.getString("status"));
    String write = waiting ? "wait_created" : "wait_completed";
    String evidence =
        "wait "
            + waitId
            + " is "
            + row.getString("status")
            + " in workflow_waits, its "
            + write
            + " is not in the log";
    String sql =
        waiting
            ? "DELETE FROM " + engine + ".workflow_waits WHERE wait_id = $1 AND status = 'waiting'"
            : "UPDATE "
                + engine
                + ".workflow_waits SET status = 'waiting', completed_at = NULL"
                + " WHERE wait_id = $1 AND status = 'completed'";
    String done =
        waiting
            ? "; rolled back: the row deleted, the replay creates the wait again"
            : "; rolled back: the row waiting again, the replay completes the wait again";
    return client
        .preparedQuery(sql)
        .execute(Tuple.of(waitId))
        .map(r -> new Mend(runId, write, waitId, evidence + done));
  }

  private interface Repair {
    Uni<Mend> apply(SqlClient client, Row row);
  }

  /** One repair after another on the transaction's connection, in the rows' order. */
  private static Uni<List<Mend>> each(SqlClient client, Iterable<Row> rows, Repair repair) {
    List<Row> list = new ArrayList<>();
    rows.forEach(list::add);
    if (list.isEmpty()) {
      return Uni.createFrom().item(List.of());
    }
    return Multi.createFrom()
        .iterable(list)
        .onItem()
        .transformToUniAndConcatenate(r -> repair.apply(client, r))
        .collect()
        .asList();
  }

  private static List<Mend> concat(List<Mend> first, List<Mend> then) {
    List<Mend> all = new ArrayList<>(first);
    all.addAll(then);
    return all;
  }

  private static byte[] bytes(Row row, String column) {
    Object value = row.getValue(column);
    if (value instanceof Buffer b) {
      return b.getBytes();
    }
    if (value instanceof io.vertx.mutiny.core.buffer.Buffer b) {
      return b.getBytes();
    }
    return null;
  }
}
