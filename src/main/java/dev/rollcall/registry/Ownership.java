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
 * Only the ownership of an instance not declared dead counts, decided in the statement that reads
 * it.
 */
@ApplicationScoped
public class Ownership {

  /** The most entries one in-flight set may carry. */
  public static final int MAX_IN_FLIGHT = 10_000;

  /** One instance's in-flight set as it reports it now, to replace what it reported before. */
  public record Replacement(Caller caller, Collection<InFlight> inFlight) {}

  /**
   * Replaces the instance's in-flight set with exactly these executions: its runs, and the queue
   * message ids of those whose message it knows. A message keeps the time it was first reported
   * (the proof that a queue lock taken before then is this instance's).
   */
  public Uni<Void> replace(SqlClient client, Caller caller, Collection<InFlight> inFlight) {
    return replace(client, List.of(new Replacement(caller, inFlight)));
  }

  /**
   * Replaces the in-flight sets of several instances in one statement (a heartbeat flush's): each
   * instance's rows become exactly its set, an empty set included. Of two sets of one instance the
   * last counts. The caller holds the instances' rows locked (the renewal, a registration or a
   * leave), so no other writer of these instances' rows runs meanwhile.
   */
  public Uni<Void> replace(SqlClient client, List<Replacement> sets) {
    Map<UUID, Replacement> last = new java.util.LinkedHashMap<>();
    for (Replacement r : sets) {
      last.put(r.caller().instanceId(), r);
    }
    if (last.isEmpty()) {
      return Uni.createFrom().voidItem();
    }
    UUID[] instances = new UUID[last.size()];
    String[] namespaces = new String[last.size()];
    List<UUID> owners = new java.util.ArrayList<>();
    List<String> runIds = new java.util.ArrayList<>();
    List<String> messageIds = new java.util.ArrayList<>();
    int i = 0;
    for (Replacement r : last.values()) {
      instances[i] = r.caller().instanceId();
      namespaces[i++] = r.caller().namespace();
      for (InFlight e : r.inFlight()) {
        owners.add(r.caller().instanceId());
        runIds.add(e.runId());
        messageIds.add(e.messageId());
      }
    }
    return client
        .preparedQuery(REPLACE)
        .execute(
            Tuple.of(
                instances,
                namespaces,
                owners.toArray(UUID[]::new),
                runIds.toArray(String[]::new),
                messageIds.toArray(String[]::new)))
        .replaceWithVoid();
  }

  /**
   * Instances {@code $1} (of namespaces {@code $2}) now execute exactly the executions {@code ($3,
   * $4, $5)}: instance, run, message id or null. The statement, and why it reads the tables as it
   * does, is the database function's ({@code V20__in_flight_sets_by_instance.sql}): each instance's
   * rows read through its key by plain index scans, a steady set writing nothing.
   */
  static final String REPLACE = "SELECT rollcall.replace_in_flight($1, $2, $3, $4, $5)";

  /**
   * The owners of runs {@code $2} of namespace {@code $1} not declared dead: read from the runs'
   * ownership rows, their instances joined by id, not from every live instance's rows. An instance
   * whose lease ran out is no less an owner until its death is declared: a lease that ran out is no
   * evidence of death (the database restarted, no service replica ran; a session lock still held is
   * proof of life), and the transaction that declares it takes its runs away ({@link #release}) and
   * hands them to its takeover. Until then, an epoch that counted them unowned would re-drive them
   * beside a process that may be executing them, or beside that takeover.
   */
  static final String LIVE_OWNERS =
      "SELECT o.run_id, o.instance_id FROM rollcall.ownership o"
          + " JOIN rollcall.instances i ON i.id = o.instance_id"
          + " WHERE o.namespace = $1 AND o.run_id = ANY($2::text[]) AND i.state = 'live'";

  /** The owner not declared dead of each of these runs that has one. */
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
