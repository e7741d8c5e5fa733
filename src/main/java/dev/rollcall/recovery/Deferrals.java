package dev.rollcall.recovery;

import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.SqlClient;
import io.vertx.mutiny.sqlclient.Tuple;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.List;
import java.util.stream.StreamSupport;

/**
 * Runs an epoch deferred. A run deferred because a live instance owned it may be re-checked at
 * once; one deferred for recent activity only after the activity fence has passed, so that a peer
 * that just started it has had a heartbeat to report it.
 */
@ApplicationScoped
public class Deferrals {

  private final Ledger ledger;

  Deferrals(Ledger ledger) {
    this.ledger = ledger;
  }

  /** Defers these runs in the epoch and records it in the ledger. */
  public Uni<Void> defer(SqlClient client, Epoch epoch, List<Verdict> deferred) {
    if (deferred.isEmpty()) {
      return Uni.createFrom().voidItem();
    }
    return client
        .preparedQuery(
            "INSERT INTO rollcall.deferred (epoch_id, run_id, workflow_name, reason)"
                + " SELECT $1, u.run_id, u.workflow_name, u.reason"
                + " FROM unnest($2::text[], $3::text[], $4::text[])"
                + " AS u(run_id, workflow_name, reason) ON CONFLICT DO NOTHING")
        .execute(
            Tuple.of(
                epoch.id(),
                deferred.stream().map(Verdict::runId).toArray(String[]::new),
                deferred.stream().map(Verdict::workflowName).toArray(String[]::new),
                deferred.stream().map(v -> v.reason().wire()).toArray(String[]::new)))
        .chain(() -> ledger.record(client, epoch, deferred, "deferred", null));
  }

  /** Deferred runs whose re-check is due, at most {@code limit}. */
  public Uni<List<String>> due(SqlClient client, long epochId, long activityFenceMs, int limit) {
    return client
        .preparedQuery(
            "SELECT run_id FROM rollcall.deferred WHERE epoch_id = $1"
                + " AND (reason = 'owned-by-live-instance'"
                + "   OR deferred_at <= now() - $2::bigint * interval '1 millisecond')"
                + " ORDER BY run_id LIMIT $3")
        .execute(Tuple.of(epochId, activityFenceMs, limit))
        .map(
            rows ->
                StreamSupport.stream(rows.spliterator(), false)
                    .map(r -> r.getString("run_id"))
                    .toList());
  }

  /** The re-check happened: the runs leave the deferred set and their deferral is resolved. */
  public Uni<Void> resolve(SqlClient client, Epoch epoch, List<String> runIds) {
    String[] ids = runIds.toArray(String[]::new);
    return client
        .preparedQuery(
            "DELETE FROM rollcall.deferred WHERE epoch_id = $1 AND run_id = ANY($2::text[])")
        .execute(Tuple.of(epoch.id(), ids))
        .chain(
            () ->
                client
                    .preparedQuery(
                        // By run (ledger_by_run): the epoch's index does not hold the outcome.
                        "UPDATE rollcall.ledger SET resolved_at = now() WHERE namespace = $3"
                            + " AND run_id = ANY($2::text[]) AND epoch_id = $1"
                            + " AND outcome = 'deferred' AND resolved_at IS NULL")
                    .execute(Tuple.of(epoch.id(), ids, epoch.namespace())))
        .replaceWithVoid();
  }
}
