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

  /** The most run ids one in-flight set may carry. */
  public static final int MAX_IN_FLIGHT = 10_000;

  /** Replaces the instance's in-flight set with exactly these runs. */
  public Uni<Void> replace(SqlClient client, Caller caller, Collection<String> runIds) {
    return client
        .preparedQuery(
            "WITH incoming AS (SELECT DISTINCT unnest($2::text[]) AS run_id),"
                + " dropped AS (DELETE FROM rollcall.ownership o WHERE o.instance_id = $1"
                + "   AND NOT EXISTS (SELECT 1 FROM incoming i WHERE i.run_id = o.run_id))"
                + " INSERT INTO rollcall.ownership (instance_id, run_id, namespace)"
                + " SELECT $1, run_id, $3 FROM incoming ON CONFLICT DO NOTHING")
        .execute(Tuple.of(caller.instanceId(), runIds.toArray(String[]::new), caller.namespace()))
        .replaceWithVoid();
  }

  /** The live owner of each of these runs that has one. */
  public Uni<Map<String, UUID>> liveOwners(
      SqlClient client, String namespace, Collection<String> runIds) {
    if (runIds.isEmpty()) {
      return Uni.createFrom().item(Map.of());
    }
    return client
        .preparedQuery(
            "SELECT o.run_id, o.instance_id FROM rollcall.ownership o"
                + " JOIN rollcall.instances i ON i.id = o.instance_id"
                + " WHERE o.namespace = $1 AND o.run_id = ANY($2::text[])"
                + " AND i.state = 'live' AND i.lease_expires_at > now()")
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

  /** Takes a dead or departed instance's in-flight set away from it, returning it. */
  public Uni<List<String>> release(SqlClient client, UUID instanceId) {
    return client
        .preparedQuery("DELETE FROM rollcall.ownership WHERE instance_id = $1 RETURNING run_id")
        .execute(Tuple.of(instanceId))
        .map(
            rows ->
                java.util.stream.StreamSupport.stream(rows.spliterator(), false)
                    .map(r -> r.getString("run_id"))
                    .sorted()
                    .toList());
  }
}
