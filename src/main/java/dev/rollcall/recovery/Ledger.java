package dev.rollcall.recovery;

import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.SqlClient;
import io.vertx.mutiny.sqlclient.Tuple;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.List;
import java.util.UUID;

/**
 * Ledger rows that are not hand-outs (those are written with their batch): runs deferred or skipped
 * by an epoch, and queue locks released for a dead instance.
 */
@ApplicationScoped
public class Ledger {

  /** One row per verdict, with the given outcome. */
  public Uni<Void> record(
      SqlClient client, Epoch epoch, List<Verdict> verdicts, String outcome, UUID instanceId) {
    if (verdicts.isEmpty()) {
      return Uni.createFrom().voidItem();
    }
    String[] ids = verdicts.stream().map(Verdict::runId).toArray(String[]::new);
    String[] reasons = verdicts.stream().map(v -> v.reason().wire()).toArray(String[]::new);
    return client
        .preparedQuery(
            "INSERT INTO rollcall.ledger"
                + " (namespace, run_id, epoch_id, instance_id, reason, outcome, resolved_at)"
                + " SELECT $1, u.run_id, $2, $3, u.reason, $4,"
                + " CASE WHEN $4 = 'deferred' THEN NULL ELSE now() END"
                + " FROM unnest($5::text[], $6::text[]) AS u(run_id, reason)")
        .execute(Tuple.of(epoch.namespace(), epoch.id(), instanceId, outcome, ids, reasons))
        .replaceWithVoid();
  }

  /** A queue lock released for a dead instance, under the run it belongs to when known. */
  public Uni<Void> lockReleased(
      SqlClient client, Epoch epoch, UUID deadInstanceId, String runId, String detail) {
    return client
        .preparedQuery(
            "INSERT INTO rollcall.ledger"
                + " (namespace, run_id, epoch_id, instance_id, reason, outcome, detail, resolved_at)"
                + " VALUES ($1, $2, $3, $4, 'owner-dead', 'lock-released', $5, now())")
        .execute(Tuple.of(epoch.namespace(), runId, epoch.id(), deadInstanceId, detail))
        .replaceWithVoid();
  }
}
