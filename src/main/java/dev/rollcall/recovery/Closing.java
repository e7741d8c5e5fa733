package dev.rollcall.recovery;

import dev.rollcall.config.RollcallConfig;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.SqlClient;
import jakarta.enterprise.context.ApplicationScoped;

/**
 * A claim's last stage on an epoch whose scan is done and whose due deferred runs are resolved:
 * close the epoch if nothing is outstanding, else tell the claimer when to look again.
 */
@ApplicationScoped
class Closing {

  private final Epochs epochs;
  private final Batches batches;
  private final PassEvidence evidence;
  private final RollcallConfig config;

  Closing(Epochs epochs, Batches batches, PassEvidence evidence, RollcallConfig config) {
    this.epochs = epochs;
    this.batches = batches;
    this.evidence = evidence;
    this.config = config;
  }

  /**
   * Closes the epoch if nothing is outstanding; otherwise what the claimer gets ({@link
   * #leftOpen}).
   */
  Uni<Served> closeOrWait(SqlClient conn, Epoch epoch) {
    return epochs
        .closeIfFinished(conn, epoch.id())
        // The pass's evidence goes once this claim's transaction has committed the close: the
        // close, and the notice that the pass is over, do not wait for the delete.
        .invoke(
            closed -> {
              if (closed) {
                evidence.forgetOnceCommitted(conn, epoch.namespace(), epoch.id());
              }
            })
        .chain(
            closed ->
                closed
                    ? Uni.createFrom().item(Served.nothing())
                    : batches
                        .outstanding(conn, epoch.id(), config.effectiveActivityFence().toMillis())
                        .map(out -> leftOpen(epoch, out)));
  }

  /**
   * What a claimer gets from an epoch that stays open for what is outstanding: a boot epoch tells
   * it when to look again (its deploy is not recovered until the epoch closes); for a takeover or a
   * sweep that others hold, the claimer is done for now: heartbeats say when claimable work
   * appears.
   */
  Served leftOpen(Epoch epoch, Outstanding out) {
    return epoch.kind() == EpochKind.BOOT
        ? Served.later(WaitHints.Hint.at(out.msUntilNextLook(config.claim().waitMin().toMillis())))
        : Served.nothing();
  }
}
