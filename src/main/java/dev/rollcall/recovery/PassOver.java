package dev.rollcall.recovery;

import dev.rollcall.database.Databases;
import dev.rollcall.metrics.RecoveryMetrics;
import dev.rollcall.registry.Caller;
import dev.rollcall.registry.InstanceGuards;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Row;
import io.vertx.mutiny.sqlclient.Tuple;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.Optional;

/**
 * A claim's fast way out of a pass this replica has read closed: "done" from one read, without a
 * claim's transactions.
 */
@ApplicationScoped
class PassOver {

  private final Databases databases;
  private final ClosedEpochs closedEpochs;
  private final RecoveryMetrics metrics;

  PassOver(Databases databases, ClosedEpochs closedEpochs, RecoveryMetrics metrics) {
    this.databases = databases;
    this.closedEpochs = closedEpochs;
    this.metrics = metrics;
  }

  /**
   * What a claim's first look answers, without its transaction, for a deploy whose pass this
   * replica has read closed (an epoch never opens again): "done" when the instance is live, no
   * epoch that every instance serves (a takeover, a sweep, a manual pass) is open, and the pass's
   * row is still there. One read, outside the gate, with no permit and no row lock, like a
   * heartbeat's: the claims of a deploy that is over (replicas that start after their pass, idle
   * claims woken by a close) do not queue behind the transactions of claims that hand out work.
   * Anything else (empty) takes the usual way, whose first look answers it and refuses an instance
   * that is not live.
   *
   * <p>The liveness is read without the row lock of {@link InstanceGuards#requireLive}: "done"
   * hands nothing out, so there is nothing a concurrent death or leave must wait for. A claim
   * racing its own instance's death may be told "done", as a woken claim sharing another's look may
   * ({@link ClaimService}); the instance learns it was fenced at its next heartbeat or claim.
   */
  Uni<Optional<ClaimResult>> answer(Caller caller, long bootEpochId) {
    return Uni.createFrom()
        .deferred(
            () ->
                databases
                    .of(caller.namespace())
                    .pool()
                    .preparedQuery(PASS_OVER)
                    .execute(Tuple.of(caller.instanceId(), caller.namespace(), bootEpochId)))
        .map(
            rows -> {
              if (rows.size() == 0) {
                return Optional.<ClaimResult>empty();
              }
              Row r = rows.iterator().next();
              if (!r.getBoolean("kept")) {
                // Deleted by retention since: the deploy's claims look as a first claim would.
                closedEpochs.forgetBoot(caller.namespace(), caller.deploymentId(), bootEpochId);
                return Optional.<ClaimResult>empty();
              }
              if (!r.getBoolean("live") || r.getBoolean("shared_open")) {
                return Optional.<ClaimResult>empty();
              }
              metrics.passOver(caller.namespace());
              return Optional.<ClaimResult>of(new ClaimResult.Done(bootEpochId));
            });
  }

  /**
   * {@link #answer}'s read: $1 the instance, $2 its namespace, $3 its deploy's closed boot epoch.
   * The shared epochs are those {@link Epochs#openShared} reads ({@link Epochs#OPEN_SHARED}).
   */
  static final String PASS_OVER =
      "SELECT rollcall.is_live(i.state, i.lease_expires_at) AS live,"
          + " EXISTS (SELECT 1 FROM rollcall.epochs b WHERE b.id = $3) AS kept,"
          + " EXISTS (SELECT 1 FROM rollcall.epochs WHERE namespace = $2 AND "
          + Epochs.OPEN_SHARED
          + ") AS shared_open"
          + " FROM rollcall.instances i WHERE i.id = $1";
}
