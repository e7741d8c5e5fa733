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

  WorldPostgresTears(String quotedSchema) {
    this.engine = quotedSchema;
  }

  /** The torn writes of these runs, mended; empty when there are none (the usual answer). */
  Uni<List<Mend>> mend(SqlClient client, Collection<String> runIds) {
    if (runIds.isEmpty()) {
      return Uni.createFrom().item(List.of());
    }
    String[] ids = runIds.toArray(String[]::new);
    return lockRuns(client, ids)
        .chain(() -> client.preparedQuery(tornStepsSql(false)).execute(Tuple.of((Object) ids)))
        .chain(steps -> each(client, steps, this::mendStep))
        .chain(
            mended ->
                client
                    .preparedQuery(tornWaitsSql())
                    .execute(Tuple.of((Object) ids))
                    .chain(waits -> each(client, waits, this::mendWait))
                    .map(
                        more -> {
                          List<Mend> all = new ArrayList<>(mended);
                          all.addAll(more);
                          return all;
                        }));
  }

  /**
   * The torn steps of these runs that one of the dead instance's {@code deliveries} wrote, mended;
   * nothing else of the runs. For runs a live instance executes too. A step is written only by the
   * delivery that executes it, which holds its job's lock until it ends: by its inline owner's
   * delivery (the owner its latest {@code step_started} names, the 5.0 line), or else by the step's
   * own message. When that message's process is dead, no live process can be half-way through
   * writing the step (a {@code Promise.all} runs its steps in deliveries of their own, side by
   * side, some of them on live peers).
   */
  Uni<List<Mend>> mendOwnedSteps(
      SqlClient client, Collection<String> runIds, DeadDeliveries deliveries) {
    if (runIds.isEmpty() || deliveries.isEmpty()) {
      return Uni.createFrom().item(List.of());
    }
    String[] ids = runIds.toArray(String[]::new);
    String[] owners = deliveries.messageIds().toArray(String[]::new);
    String[] stepIds = deliveries.stepIds().toArray(String[]::new);
    return lockRuns(client, ids)
        .chain(
            () -> client.preparedQuery(tornStepsSql(true)).execute(Tuple.of(ids, owners, stepIds)))
        .chain(steps -> each(client, steps, this::mendStep));
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
   */
  String tornStepsSql(boolean ownedBy) {
    return "SELECT s.run_id, s.step_id, s.step_name, s.status::text AS status, s.output_cbor,"
        + " s.error_cbor, r.name AS workflow_name, st.spec_version,"
        + " (SELECT max(e.id) FROM "
        + engine
        + ".workflow_events e WHERE e.run_id = s.run_id) AS last_event_id,"
        + " (extract(epoch FROM now()) * 1000)::bigint AS now_ms"
        + " FROM "
        + engine
        + ".workflow_steps s JOIN "
        + engine
        + ".workflow_runs r ON r.id = s.run_id"
        + " JOIN LATERAL (SELECT e.spec_version,"
        + "   rollcall.cbor_text(e.payload_cbor, 'ownerMessageId') AS owner FROM "
        + engine
        + ".workflow_events e WHERE e.correlation_id = s.step_id AND e.run_id = s.run_id"
        + "   AND e.type = 'step_started' ORDER BY e.id DESC LIMIT 1) st ON true"
        + " WHERE s.run_id = ANY($1::text[]) AND s.status IN ('completed', 'failed')"
        // Inline-owned steps by their owner; the others by their own message's step.
        + (ownedBy
            ? " AND (st.owner = ANY($2::text[])"
                + " OR (st.owner IS NULL AND s.step_id = ANY($3::text[])))"
            : "")
        + " AND r.status IN ('pending', 'running')"
        + " AND NOT EXISTS (SELECT 1 FROM "
        + engine
        + ".workflow_events e WHERE e.correlation_id = s.step_id AND e.run_id = s.run_id"
        + "   AND e.type IN ('step_completed', 'step_failed'))"
        + " ORDER BY s.run_id, s.step_id"
        + " FOR UPDATE OF s";
  }

  /**
   * Wait rows of active runs that the log does not explain, locked: a waiting wait without its
   * {@code wait_created}, a completed one without its {@code wait_completed}. A wait's id is its
   * run's id, a dash and the correlation id of its events.
   */
  String tornWaitsSql() {
    return "SELECT w.run_id, w.wait_id, w.status::text AS status,"
        + " substr(w.wait_id, length(w.run_id) + 2) AS correlation_id"
        + " FROM "
        + engine
        + ".workflow_waits w JOIN "
        + engine
        + ".workflow_runs r ON r.id = w.run_id"
        + " WHERE w.run_id = ANY($1::text[]) AND r.status IN ('pending', 'running')"
        + " AND NOT EXISTS (SELECT 1 FROM "
        + engine
        + ".workflow_events e WHERE e.correlation_id = substr(w.wait_id, length(w.run_id) + 2)"
        + "   AND e.run_id = w.run_id"
        + "   AND e.type = CASE w.status::text WHEN 'waiting' THEN 'wait_created'"
        + "     ELSE 'wait_completed' END)"
        + " ORDER BY w.run_id, w.wait_id"
        + " FOR UPDATE OF w";
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
  private static Uni<List<Mend>> each(
      SqlClient client, io.vertx.mutiny.sqlclient.RowSet<Row> rows, Repair repair) {
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
