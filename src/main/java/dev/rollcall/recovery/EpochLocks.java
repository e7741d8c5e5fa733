package dev.rollcall.recovery;

import dev.rollcall.concurrency.Gate;
import dev.rollcall.concurrency.Lanes;
import dev.rollcall.config.RollcallConfig;
import dev.rollcall.metrics.RecoveryMetrics;
import dev.rollcall.registry.InstanceGuards;
import dev.rollcall.source.ScannedRun;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.SqlClient;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.List;
import java.util.OptionalLong;

/**
 * A claim's stage after a first look that found nothing to take at once: the epochs in order under
 * their locks, one short transaction each, until one yields a batch or a range. Claims of one
 * service replica queue for an epoch's lock in memory ({@link Lanes}), not on a pooled connection,
 * so waiting claimers never starve heartbeats of connections.
 */
@ApplicationScoped
class EpochLocks {

  /** Each epoch's lane, by namespace and id ({@link ClosedEpochs#epoch}): ids are per database. */
  private final Lanes<String> lanes = new Lanes<>();

  private final Gate gate;
  private final InstanceGuards guards;
  private final Epochs epochs;
  private final Batches batches;
  private final ClosedEpochs closedEpochs;
  private final EpochSteps steps;
  private final Cuts cuts;
  private final RollcallConfig config;
  private final RecoveryMetrics metrics;

  EpochLocks(
      Gate gate,
      InstanceGuards guards,
      Epochs epochs,
      Batches batches,
      ClosedEpochs closedEpochs,
      EpochSteps steps,
      Cuts cuts,
      RollcallConfig config,
      RecoveryMetrics metrics) {
    this.gate = gate;
    this.guards = guards;
    this.epochs = epochs;
    this.batches = batches;
    this.closedEpochs = closedEpochs;
    this.steps = steps;
    this.cuts = cuts;
    this.config = config;
    this.metrics = metrics;
  }

  /** No claim of this replica holds or waits for the epoch's lock. */
  boolean idle(String namespace, long epochId) {
    return lanes.idle(ClosedEpochs.epoch(namespace, epochId));
  }

  /** Claims of this replica queued behind the one holding (or taking) an epoch's lock. */
  int queued(String namespace, long epochId) {
    return lanes.queued(ClosedEpochs.epoch(namespace, epochId));
  }

  /**
   * Serves the epochs in order from {@code walk}'s next one, under their locks, until one yields a
   * batch or a range; else nothing, with the soonest wait hint of them all. {@code readAhead}: the
   * epoch whose next page the claim may read ahead of its lock ({@link #lockAndStep}).
   */
  Uni<Served> serve(ClaimContext claim, Walk walk, OptionalLong readAhead) {
    if (walk.finished()) {
      return Uni.createFrom().item(Served.nothing().withHint(walk.hint()));
    }
    Epoch epoch = walk.epoch();
    boolean ahead = readAhead.isPresent() && readAhead.getAsLong() == epoch.id();
    Uni<Served> here =
        !epoch.open()
            ? Uni.createFrom().item(Served.nothing())
            : lanes.run(
                ClosedEpochs.epoch(claim.namespace(), epoch.id()),
                () ->
                    // A claim ahead in the lane found the epoch closed: nothing to lock it for.
                    closedEpochs.contains(claim.namespace(), epoch.id())
                        ? Uni.createFrom()
                            .item(Served.nothing())
                            .invoke(() -> metrics.epochLock(claim.namespace(), "skipped"))
                        : gate.runAhead(
                            () ->
                                claim
                                    .pool()
                                    .withTransaction(
                                        conn -> lockAndStep(conn, claim, epoch, ahead))));
    return here.chain(
        served ->
            served.found()
                ? Uni.createFrom().item(served)
                : serve(claim, walk.past(served.hint()), readAhead));
  }

  /**
   * Takes an epoch's lock, waiting for it, and takes the epoch's step. While the epoch is being
   * scanned and the caller may read ahead (it already works the scan, or the scan is open to any
   * number of instances), the next page is read in the same round trip as the lock (pipelined right
   * behind it, after the cursor the lock's last holder committed), so the lock is held for the cut
   * and its commit only; the page is dropped if the locked epoch has nothing to cut after all, or
   * no room for the caller ({@link Scanners}). Other claims may find the scan full under the lock,
   * so they read no page before they know.
   */
  private Uni<Served> lockAndStep(
      SqlClient conn, ClaimContext claim, Epoch view, boolean readAhead) {
    if (!scansAhead(view) || !(readAhead || cuts.scannerLimit() <= 0)) {
      return guards
          .requireLive(conn, claim.instanceId())
          .chain(() -> epochs.lock(conn, view.id()))
          .invoke(this::rememberIfClosed)
          .invoke(() -> metrics.epochLock(claim.namespace(), "queued"))
          .chain(locked -> steps.visit(conn, claim, locked));
    }
    // Fail fast, not collecting failures: the liveness check's 410 comes first and is the answer.
    return Uni.combine()
        .all()
        .unis(
            guards.requireLive(conn, claim.instanceId()).replaceWith(true),
            epochs.lock(conn, view.id()),
            batches.scanners(conn, view.id(), claim.instanceId()),
            claim.fromSource(
                claim
                    .source()
                    .pageAfterEpochCursor(
                        conn,
                        view.snapshot(),
                        view.id(),
                        claim.maxRuns(),
                        config.effectiveActivityFence())))
        .asTuple()
        .invoke(t -> rememberIfClosed(t.getItem2()))
        .invoke(() -> metrics.epochLock(claim.namespace(), "queued"))
        .chain(t -> stepWithPage(conn, claim, t.getItem2(), t.getItem3(), t.getItem4()));
  }

  /**
   * The epoch's row read under its lock is the committed one: if it says closed, the claims queued
   * behind this one in the epoch's lane need not take the lock ({@link ClosedEpochs}).
   */
  private void rememberIfClosed(Epoch locked) {
    if (!locked.open()) {
      closedEpochs.add(locked.namespace(), locked.id());
    }
  }

  /**
   * Holding the epoch lock, with a page read ahead of it: cut that page if the epoch is still being
   * scanned (the page was read after the cursor the lock protects, so it is the next one), else
   * drop it and take the epoch's step.
   */
  private Uni<Served> stepWithPage(
      SqlClient conn, ClaimContext claim, Epoch locked, Scanners scanners, List<ScannedRun> page) {
    if (!scansAhead(locked)) {
      return steps.visit(conn, claim, locked);
    }
    if (!scanners.admit(cuts.scannerLimit())) {
      return Uni.createFrom().item(cuts.full(locked, claim, scanners));
    }
    return steps.untilServed(conn, claim, cuts.cutPage(conn, claim, locked, page, claim.maxRuns()));
  }

  /**
   * Whether a page may be read ahead of an epoch's lock: the epoch is being scanned past its first
   * page (a cursor never goes back to none), and is not a sweep, whose page size its rate decides
   * under the lock.
   */
  private static boolean scansAhead(Epoch epoch) {
    return epoch.open()
        && !epoch.scanDone()
        && epoch.cursor().isPresent()
        && epoch.kind() != EpochKind.SWEEP;
  }
}
