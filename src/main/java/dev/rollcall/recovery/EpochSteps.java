package dev.rollcall.recovery;

import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.SqlClient;
import jakarta.enterprise.context.ApplicationScoped;

/**
 * A claim's visit to one epoch, holding its lock: the loop of its steps. A step cuts the next range
 * while the scan runs ({@link Cuts}); once it is done, re-lets a batch whose lease expired ({@link
 * Relets}), else re-checks the deferred runs that are due ({@link DeferredRechecks}), else closes
 * the epoch or says when to look again ({@link Closing}).
 */
@ApplicationScoped
class EpochSteps {

  private final Cuts cuts;
  private final Relets relets;
  private final DeferredRechecks rechecks;

  EpochSteps(Cuts cuts, Relets relets, DeferredRechecks rechecks) {
    this.cuts = cuts;
    this.relets = relets;
    this.rechecks = rechecks;
  }

  /**
   * Holding the epoch lock, the loop of a claim's visit to one epoch: take a {@link #step}; while
   * it says {@code again} (the scan just finished, or re-checked runs handed nothing out), take the
   * next one on the epoch as it now is. Every {@code again} moves the epoch on (its scan is done,
   * or due deferred runs were resolved), so the loop ends.
   */
  Uni<Served> visit(SqlClient conn, ClaimContext claim, Epoch epoch) {
    return untilServed(conn, claim, step(conn, claim, epoch));
  }

  /** What a step served, or, if it says {@code again}, the rest of the visit ({@link #visit}). */
  Uni<Served> untilServed(SqlClient conn, ClaimContext claim, Uni<Step> step) {
    return step.chain(
        s ->
            s.again().isEmpty()
                ? Uni.createFrom().item(s.served().get())
                : visit(conn, claim, s.again().get()));
  }

  /** One step under the epoch lock: cut a page, else re-let, else re-check deferred runs. */
  private Uni<Step> step(SqlClient conn, ClaimContext claim, Epoch epoch) {
    if (!epoch.open()) {
      return Uni.createFrom().item(Step.done(Served.nothing()));
    }
    if (!epoch.scanDone()) {
      return cuts.next(conn, claim, epoch);
    }
    // A lease may have expired since the first look; the epoch lock does not cover batches.
    return relets
        .relet(conn, claim, epoch)
        .chain(
            served ->
                served.isPresent()
                    ? Uni.createFrom().item(Step.done(served.get()))
                    : rechecks.recheck(conn, claim, epoch));
  }
}
