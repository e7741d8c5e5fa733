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
 * another epoch since its deferral (its owner's takeover); a takeover defers one a live instance
 * still reports again, and re-drives it once none does ({@link TakeoverRechecks}).
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

  DeferredRechecks(
      Deferrals deferrals,
      Classifier classifier,
      Batches batches,
      Verdicts verdicts,
      Closing closing,
      TakeoverRechecks takeovers,
      PassTraces passTraces) {
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
                          .chain(found -> notHandedOutTwice(conn, epoch, found))
                          .call(found -> verdicts.mendTorn(conn, claim.source(), epoch, found))
                          .call(found -> passTraces.rechecked(conn, epoch, due.size(), found)))
                  .chain(
                      found ->
                          deferrals
                              .resolve(conn, epoch, due)
                              .chain(() -> verdicts.record(conn, epoch, found))
                              .chain(
                                  () ->
                                      handOut(
                                          conn,
                                          claim,
                                          epoch,
                                          Verdicts.of(found, Disposition.HAND_OUT))));
            });
  }

  /**
   * A pass's re-check hands out no run another epoch handed out since the pass deferred it: the
   * takeover of its owner, dead since, answers for it ({@link Deferrals#HANDED_OUT_ELSEWHERE}).
   */
  private Uni<List<Verdict>> notHandedOutTwice(SqlClient conn, Epoch epoch, List<Verdict> found) {
    List<String> out =
        Verdicts.of(found, Disposition.HAND_OUT).stream().map(Verdict::runId).toList();
    return deferrals
        .handedOutElsewhere(conn, epoch, out)
        .map(elsewhere -> Verdicts.notHandedOutTwice(found, elsewhere));
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
