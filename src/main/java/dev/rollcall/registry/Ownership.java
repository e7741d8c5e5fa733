package dev.rollcall.registry;

import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Row;
import io.vertx.mutiny.sqlclient.SqlClient;
import io.vertx.mutiny.sqlclient.Tuple;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;

/**
 * The runs each instance is executing right now, as its heartbeats report them (replace semantics).
 * Only a live instance's ownership counts: liveness is decided in the same statement that reads it.
 */
@ApplicationScoped
public class Ownership {

  /** The most entries one in-flight set may carry. */
  public static final int MAX_IN_FLIGHT = 10_000;

  /**
   * Replaces the instance's in-flight set with exactly these executions: its runs, and the queue
   * message ids of those whose message it knows. A message keeps the time it was first reported
   * (the proof that a queue lock taken before then is this instance's).
   */
  public Uni<Void> replace(SqlClient client, Caller caller, Collection<InFlight> inFlight) {
    String[] runIds = new String[inFlight.size()];
    String[] messageIds = new String[inFlight.size()];
    int i = 0;
    for (InFlight e : inFlight) {
      runIds[i] = e.runId();
      messageIds[i++] = e.messageId();
    }
    return client
        .preparedQuery(
            "WITH incoming AS (SELECT u.run_id, u.message_id"
                + "   FROM unnest($2::text[], $3::text[]) AS u(run_id, message_id)),"
                + " runs AS (SELECT DISTINCT run_id FROM incoming),"
                + " messages AS (SELECT DISTINCT ON (message_id) message_id, run_id FROM incoming"
                + "   WHERE message_id IS NOT NULL ORDER BY message_id, run_id),"
                + " dropped AS (DELETE FROM rollcall.ownership o WHERE o.instance_id = $1"
                + "   AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.run_id = o.run_id)),"
                + " dropped_messages AS (DELETE FROM rollcall.ownership_messages m"
                + "   WHERE m.instance_id = $1"
                + "   AND NOT EXISTS (SELECT 1 FROM messages i WHERE i.message_id = m.message_id)),"
                + " added_messages AS (INSERT INTO rollcall.ownership_messages"
                + "   (instance_id, message_id, run_id, namespace)"
                + "   SELECT $1, message_id, run_id, $4 FROM messages ON CONFLICT DO NOTHING)"
                + " INSERT INTO rollcall.ownership (instance_id, run_id, namespace)"
                + " SELECT $1, run_id, $4 FROM runs ON CONFLICT DO NOTHING")
        .execute(Tuple.of(caller.instanceId(), runIds, messageIds, caller.namespace()))
        .replaceWithVoid();
  }

  /**
   * The live owners of runs {@code $2} of namespace {@code $1}: read from the runs' ownership rows,
   * their instances joined by id ({@link Liveness}), not from every live instance's rows.
   */
  static final String LIVE_OWNERS =
      "SELECT o.run_id, o.instance_id FROM rollcall.ownership o"
          + " JOIN rollcall.instances i ON i.id = o.instance_id"
          + " WHERE o.namespace = $1 AND o.run_id = ANY($2::text[]) AND "
          + Liveness.liveById("i.");

  /** The live owner of each of these runs that has one. */
  public Uni<Map<String, UUID>> liveOwners(
      SqlClient client, String namespace, Collection<String> runIds) {
    if (runIds.isEmpty()) {
      return Uni.createFrom().item(Map.of());
    }
    return client
        .preparedQuery(LIVE_OWNERS)
        .execute(Tuple.of(namespace, runIds.toArray(String[]::new)))
        .map(
            rows -> {
              Map<String, UUID> owners = new HashMap<>();
              for (Row r : rows) {
                owners.put(r.getString("run_id"), r.getUUID("instance_id"));
              }
              return owners;
            });
  }

  /** Takes a dead or departed instance's in-flight set away from it, returning its runs. */
  public Uni<List<String>> release(SqlClient client, UUID instanceId) {
    return client
        .preparedQuery(
            "WITH messages AS (DELETE FROM rollcall.ownership_messages WHERE instance_id = $1)"
                + " DELETE FROM rollcall.ownership WHERE instance_id = $1 RETURNING run_id")
        .execute(Tuple.of(instanceId))
        .map(
            rows ->
                java.util.stream.StreamSupport.stream(rows.spliterator(), false)
                    .map(r -> r.getString("run_id"))
                    .sorted()
                    .toList());
  }
}
