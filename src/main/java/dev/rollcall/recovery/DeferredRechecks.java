package dev.rollcall.recovery;

import dev.rollcall.recovery.Verdict.Disposition;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.SqlClient;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.List;

/**
 * A claim's stage on an epoch whose scan is done, holding its lock: re-check the deferred runs that
 * are due and hand out those whose proof is gone; with none due, the epoch's close ({@link
 * Closing}). A pass skips for good a run still owned or active at its re-check, or handed out by
 * another epoch since its deferral (its owner's takeover), and defers again one another epoch is
 * handing out at this moment ({@link SingleHandOut}); a takeover defers one a live instance still
 * reports again, and re-drives it once none does ({@link TakeoverRechecks}).
 */
@ApplicationScoped
class DeferredRechecks {

  private final Deferrals deferrals;
  private final Classifier classifier;
  private final Batches batches;
  private final Verdicts verdicts;
  private final Closing closing;
  private final TakeoverRechecks takeovers;
  private final PassTraces passTraces;
  private final SingleHandOut singleHandOut;

  DeferredRechecks(
      Deferrals deferrals,
      Classifier classifier,
      Batches batches,
      Verdicts verdicts,
      Closing closing,
      TakeoverRechecks takeovers,
      PassTraces passTraces,
      SingleHandOut singleHandOut) {
    this.singleHandOut = singleHandOut;
    this.deferrals = deferrals;
    this.classifier = classifier;
    this.batches = batches;
    this.verdicts = verdicts;
    this.closing = closing;
    this.takeovers = takeovers;
    this.passTraces = passTraces;
  }

  /**
   * The scan is finished: deferred runs whose re-check is due are skipped for good (still owned,
   * still active, finished) or handed out; when none is due, close the epoch or report when to look
   * again.
   */
  Uni<Step> recheck(SqlClient conn, ClaimContext claim, Epoch epoch) {
    return deferrals
        .due(conn, epoch, claim.maxRuns())
        .chain(
            due -> {
              if (due.isEmpty()) {
                return closing.closeOrWait(conn, epoch).map(Step::done);
              }
              if (epoch.kind() == EpochKind.TAKEOVER) {
                return takeoverRecheck(conn, claim, epoch, due);
              }
              return claim
                  .fromSource(
                      classifier
                          .recheck(conn, claim.source(), epoch, due)
                          .call(found -> verdicts.mendTorn(conn, claim.source(), epoch, found))
                          // Last, after the menders' locks (see SingleHandOut).
                          .chain(found -> singleHandOut.recheck(conn, epoch, found))
                          .call(found -> passTraces.rechecked(conn, epoch, due.size(), found)))
                  .chain(
                      found ->
                          deferrals
                              .again(conn, epoch.id(), Verdicts.of(found, Disposition.DEFER))
                              .chain(
                                  () ->
                                      deferrals.resolve(
                                          conn,
                                          epoch,
                                          found.stream()
                                              .filter(v -> v.disposition() != Disposition.DEFER)
                                              .map(Verdict::runId)
                                              .toList()))
                              .chain(
                                  () ->
                                      verdicts.record(
                                          conn,
                                          epoch,
                                          found.stream()
                                              .filter(v -> v.disposition() != Disposition.DEFER)
                                              .toList()))
                              .chain(
                                  () ->
                                      handOut(
                                          conn,
                                          claim,
                                          epoch,
                                          Verdicts.of(found, Disposition.HAND_OUT))));
            });
  }

  /** A takeover's due deferred runs, settled ({@link TakeoverRechecks#settle}). */
  private Uni<Step> takeoverRecheck(
      SqlClient conn, ClaimContext claim, Epoch epoch, List<String> due) {
    return claim
        .fromSource(takeovers.settle(conn, claim.source(), epoch, due))
        .chain(runs -> handOut(conn, claim, epoch, runs));
  }

  /**
   * Holding the epoch lock: leases re-checked runs to the caller as a new batch; with none, the
   * next step is on the same epoch.
   */
  private Uni<Step> handOut(SqlClient conn, ClaimContext claim, Epoch epoch, List<Verdict> runs) {
    if (runs.isEmpty()) {
      return Uni.createFrom().item(Step.again(epoch));
    }
    return batches
        .cut(conn, epoch, Verdicts.handedOut(claim.source(), runs), claim.lease())
        .map(batch -> Step.done(Served.batch(batch)));
  }
}
