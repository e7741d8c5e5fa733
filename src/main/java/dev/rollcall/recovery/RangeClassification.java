package dev.rollcall.recovery;

import dev.rollcall.config.RollcallConfig;
import dev.rollcall.recovery.Verdict.Disposition;
import dev.rollcall.registry.InstanceGuards;
import dev.rollcall.source.RunSource;
import dev.rollcall.source.ScannedRun;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.SqlClient;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.jboss.logging.Logger;

/**
 * A claim's stage after the epoch lock is released, in a transaction of its own and in parallel
 * with other claimers' ranges: classify the range the caller was leased, and hand out its runs as
 * the caller's batch (runs a live instance owns, or that were recently active, are deferred).
 */
@ApplicationScoped
class RangeClassification {

  private static final Logger LOG = Logger.getLogger(RangeClassification.class);

  private final InstanceGuards guards;
  private final Classifier classifier;
  private final Batches batches;
  private final Verdicts verdicts;
  private final SingleHandOut singleHandOut;
  private final RollcallConfig config;

  RangeClassification(
      InstanceGuards guards,
      Classifier classifier,
      Batches batches,
      Verdicts verdicts,
      SingleHandOut singleHandOut,
      RollcallConfig config) {
    this.guards = guards;
    this.classifier = classifier;
    this.batches = batches;
    this.verdicts = verdicts;
    this.singleHandOut = singleHandOut;
    this.config = config;
  }

  /**
   * Classifies a range leased to the caller, outside the epoch lock: writes its deferrals and
   * skips, and turns it into the caller's batch of the runs to hand out. Empty when it hands out
   * nothing, or when the range's lease was lost to another claimer (then nothing is written).
   */
  Uni<Optional<LeasedBatch>> classify(SqlClient conn, ClaimContext claim, Served.ToClassify work) {
    Epoch epoch = work.epoch();
    RunSource source = claim.source();
    // A range whose classification failed (or whose claimers died) maxAttempts times running is
    // a poison range: its runs are handed out unclassified (fail open), so it cannot hold its
    // epoch open for ever.
    boolean failOpen = work.range().poison(config.batch().maxAttempts());
    return guards
        .requireLive(conn, claim.instanceId())
        .chain(() -> rangeRuns(conn, claim, work))
        .chain(
            known ->
                (failOpen
                        ? Uni.createFrom().item(unclassified(work.range(), known.active()))
                        : classifier.firstLook(conn, source, epoch, known.active()))
                    .call(found -> verdicts.mendTorn(conn, source, epoch, found))
                    .chain(found -> singleHandOut.passFirstLook(conn, epoch, found))
                    .map(
                        found -> {
                          List<Verdict> all = new ArrayList<>(found);
                          all.addAll(known.gone());
                          return all;
                        }))
        .chain(
            all ->
                batches
                    .settleRange(
                        conn,
                        epoch,
                        work.range(),
                        Verdicts.handedOut(source, Verdicts.of(all, Disposition.HAND_OUT)),
                        claim.lease())
                    .chain(
                        settled ->
                            settled.isEmpty()
                                ? Uni.createFrom().item(Optional.<LeasedBatch>empty())
                                : verdicts.record(conn, epoch, all).replaceWith(settled.get())));
  }

  /** The active runs of a poison range, handed out without a classification. */
  private static List<Verdict> unclassified(Batches.Range range, List<ScannedRun> active) {
    LOG.warnf(
        "scan range %d was taken over %d times without being classified: its %d active runs are"
            + " handed out unclassified",
        range.id(), range.retakes(), active.size());
    return active.stream()
        .map(r -> Verdict.handOut(r.runId(), r.workflowName(), Reason.UNCLASSIFIED, null))
        .toList();
  }

  /** A range's runs: active ones to classify, and runs that finished since (skipped). */
  private record RangeRuns(List<ScannedRun> active, List<Verdict> gone) {}

  private Uni<RangeRuns> rangeRuns(SqlClient conn, ClaimContext claim, Served.ToClassify work) {
    if (work.page().isPresent()) {
      return Uni.createFrom().item(new RangeRuns(work.page().get(), List.of()));
    }
    // A range re-taken from a claimer that did not classify it: read its runs again.
    RunSource source = claim.source();
    return claim
        .fromSource(source.lookup(conn, work.range().runIds(), config.effectiveActivityFence()))
        .map(
            current -> {
              List<ScannedRun> active = new ArrayList<>();
              List<Verdict> gone = new ArrayList<>();
              for (String id : work.range().runIds()) {
                ScannedRun run = current.get(id);
                if (run != null && source.isActive(run)) {
                  active.add(run);
                } else {
                  gone.add(
                      Verdict.skip(id, run == null ? null : run.workflowName(), Reason.TERMINAL));
                }
              }
              return new RangeRuns(active, gone);
            });
  }
}
