package dev.rollcall.recovery;

import dev.rollcall.config.RollcallConfig;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.SqlClient;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.Optional;

/**
 * A claim's stage that re-lets what other claimers let go: a ready batch, one whose lease expired,
 * or a scanning range whose claimer did not classify it in time. Runs in a claim's first look (no
 * epoch lock) and again under an epoch's lock once its scan is done.
 */
@ApplicationScoped
class Relets {

  private final Batches batches;
  private final RollcallConfig config;

  Relets(Batches batches, RollcallConfig config) {
    this.batches = batches;
    this.config = config;
  }

  /**
   * Re-leases the oldest claimable batch, giving up batches that were handed out too often; a
   * scanning range whose claimer did not classify it in time is taken over to classify.
   */
  Uni<Optional<Served>> relet(SqlClient conn, ClaimContext claim, Epoch epoch) {
    return batches
        .nextClaimable(conn, epoch.id())
        .chain(
            candidate -> {
              if (candidate.isEmpty()) {
                return Uni.createFrom().item(Optional.<Served>empty());
              }
              Batches.Claimable batch = candidate.get();
              if (batch.scanning()) {
                return batches
                    .retakeRange(conn, batch, claim.lease())
                    .map(
                        range ->
                            Optional.of(
                                Served.range(
                                    new Served.ToClassify(epoch, range, Optional.empty()))));
              }
              if (batch.exhausted(config.batch().maxAttempts())) {
                return batches.abandon(conn, batch).chain(() -> relet(conn, claim, epoch));
              }
              return batches
                  .relet(conn, claim.source(), epoch, batch, claim.lease())
                  .map(leased -> Optional.of(Served.batch(leased)));
            });
  }
}
