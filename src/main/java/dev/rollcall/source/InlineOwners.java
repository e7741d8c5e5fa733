package dev.rollcall.source;

import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.SqlClient;
import io.vertx.mutiny.sqlclient.Tuple;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

/**
 * The 5.0 engine line's inline ownership of steps, read from its tables: a step a delivery started
 * carries its owner message's id ({@code ownerMessageId} in the {@code step_started} event's CBOR
 * data), and until the inline-ownership lease ends only that message re-runs the step. Which runs
 * have such an interrupted step, with which owner, and the owner messages' jobs kept deliverable
 * (docs/torn-runs.md). One home for these statements, which {@link WorldPostgresSource} serves.
 */
final class InlineOwners {

  /** The engine's schema, quoted. */
  private final String engine;

  /** The graphile task of the engine's workflow messages. */
  private final String workflowTask;

  InlineOwners(String engine, String workflowTask) {
    this.engine = engine;
    this.workflowTask = workflowTask;
  }

  /**
   * Runs with a step interrupted while inline-owned (the 5.0 engine line): the step is still
   * pending or running, its latest {@code step_started} carries an {@code ownerMessageId} (stored
   * in the event's CBOR data), no {@code step_retrying} ever lapsed that ownership, and no job of
   * that message can run any more: none keyed by it or carrying it in its payload, short of an
   * exhausted one. For such a run the engine re-runs the step only when exactly that message is
   * delivered; every other message schedules a backstop wake-up for the rest of the
   * inline-ownership lease (860 s by default). While the owner's job exists, releasing a dead
   * worker's lock on it is what wakes the run, so the run is not stranded. Reads the run's step
   * events by index, and the namespace's workflow jobs once per page (a hashed semi-join), as the
   * source's queued-job proof does without an epoch.
   */
  Uni<Map<String, String>> stranded(SqlClient client, String[] ids) {
    return owners(
        client,
        " WHERE s.owner IS NOT NULL AND NOT EXISTS (SELECT 1"
            + "   FROM graphile_worker._private_jobs j"
            + "   JOIN graphile_worker._private_tasks t ON t.id = j.task_id"
            + "   WHERE t.identifier = $2 AND j.attempts < j.max_attempts"
            + "   AND (j.key = s.owner OR j.payload ->> 'messageId' = s.owner))",
        Tuple.of(ids, workflowTask));
  }

  /**
   * Of runs {@code runIds}, those whose interrupted inline-owned step is owned by one of {@code
   * ownerMessages}, with that message ({@link RunSource#interruptedStepOwners}).
   */
  Uni<Map<String, String>> interrupted(
      SqlClient client, Collection<String> runIds, Collection<String> ownerMessages) {
    if (runIds.isEmpty() || ownerMessages.isEmpty()) {
      return Uni.createFrom().item(Map.of());
    }
    return owners(
        client,
        " WHERE s.owner = ANY($2::text[])",
        Tuple.of(runIds.toArray(String[]::new), ownerMessages.toArray(String[]::new)));
  }

  /**
   * The owner messages' jobs that can still run (the workflow task's, by the message id in their
   * payload: a hashed semi-join over the namespace's queued jobs, as {@link #stranded} reads them),
   * locked for the statement, and their keys removed. A 5.0 step message's job is keyed by its
   * step: once a dead worker's lock on it is released, a replay on a peer that queues that step
   * again would replace it (graphile's {@code replace} mode), and the owner's message, the only one
   * that re-runs the step before the inline-ownership lease ends, would be gone.
   */
  Uni<Set<String>> keepJobs(SqlClient client, Collection<String> ownerMessages) {
    if (ownerMessages.isEmpty()) {
      return Uni.createFrom().item(Set.of());
    }
    return client
        .preparedQuery(
            "WITH live AS (SELECT j.id, j.key, j.payload ->> 'messageId' AS owner"
                + "   FROM graphile_worker._private_jobs j"
                + "   JOIN graphile_worker._private_tasks t ON t.id = j.task_id"
                + "   WHERE t.identifier = $2 AND j.attempts < j.max_attempts"
                + "   AND j.payload ->> 'messageId' = ANY($1::text[]) FOR UPDATE OF j),"
                + " unkeyed AS (UPDATE graphile_worker._private_jobs j SET key = NULL FROM live"
                + "   WHERE j.id = live.id AND live.key IS NOT NULL)"
                + " SELECT DISTINCT owner FROM live")
        .execute(Tuple.of(ownerMessages.toArray(String[]::new), workflowTask))
        .map(
            rows -> {
              Set<String> live = new HashSet<>();
              rows.forEach(r -> live.add(r.getString("owner")));
              return live;
            });
  }

  /**
   * Runs with an interrupted inline-owned step (pending or running, ownership not lapsed by a
   * {@code step_retrying}), one owner message each, among those {@code ownerFilter} keeps; $1 is
   * the run ids. Reads the runs' step events by index.
   */
  private Uni<Map<String, String>> owners(SqlClient client, String ownerFilter, Tuple params) {
    return client
        .preparedQuery(
            "SELECT s.run_id, min(s.owner) AS owner FROM ("
                + "  SELECT DISTINCT ON (e.run_id, e.correlation_id) e.run_id,"
                + "    rollcall.cbor_text(e.payload_cbor, 'ownerMessageId') AS owner"
                + "  FROM "
                + engine
                + ".workflow_events e JOIN "
                + engine
                + ".workflow_steps st ON st.step_id = e.correlation_id AND st.run_id = e.run_id"
                + "  WHERE e.run_id = ANY($1::text[]) AND e.type = 'step_started'"
                + "  AND st.status IN ('pending', 'running')"
                + "  AND NOT EXISTS (SELECT 1 FROM "
                + engine
                + ".workflow_events r WHERE r.run_id = e.run_id"
                + "    AND r.correlation_id = e.correlation_id AND r.type = 'step_retrying')"
                + "  ORDER BY e.run_id, e.correlation_id, e.id DESC) s"
                + ownerFilter
                + " GROUP BY s.run_id")
        .execute(params)
        .map(
            rows -> {
              Map<String, String> owners = new HashMap<>();
              rows.forEach(r -> owners.put(r.getString("run_id"), r.getString("owner")));
              return owners;
            });
  }
}
