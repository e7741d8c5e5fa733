package dev.rollcall.recovery;

import dev.rollcall.config.RollcallConfig;
import dev.rollcall.metrics.RecoveryMetrics;
import dev.rollcall.registry.Caller;
import dev.rollcall.registry.InstanceGuards;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.SqlClient;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * A claim's first transaction: the caller's epochs in order (the namespace's open takeovers and
 * other shared passes oldest first, then the deploy's boot epoch), and a claimable batch or range
 * of any of them if there is one. With none, it takes the first open epoch's step at once if that
 * epoch's lock is free and no claim of this replica is queued for it: a lone claimer cuts its page
 * in this transaction, not in one more.
 */
@ApplicationScoped
class FirstLook {

  private final InstanceGuards guards;
  private final BootPasses boots;
  private final Epochs epochs;
  private final Batches batches;
  private final Deferrals deferrals;
  private final ClosedEpochs closedEpochs;
  private final Relets relets;
  private final EpochLocks locks;
  private final EpochSteps steps;
  private final Cuts cuts;
  private final Closing closing;
  private final RollcallConfig config;
  private final RecoveryMetrics metrics;

  FirstLook(
      InstanceGuards guards,
      BootPasses boots,
      Epochs epochs,
      Batches batches,
      Deferrals deferrals,
      ClosedEpochs closedEpochs,
      Relets relets,
      EpochLocks locks,
      EpochSteps steps,
      Cuts cuts,
      Closing closing,
      RollcallConfig config,
      RecoveryMetrics metrics) {
    this.guards = guards;
    this.boots = boots;
    this.epochs = epochs;
    this.batches = batches;
    this.deferrals = deferrals;
    this.closedEpochs = closedEpochs;
    this.relets = relets;
    this.locks = locks;
    this.steps = steps;
    this.cuts = cuts;
    this.closing = closing;
    this.config = config;
    this.metrics = metrics;
  }

  /**
   * The plan of the claim's first look. Empty when the caller's deploy has no boot epoch yet: the
   * claim creates it ({@link BootPasses#open}) and looks again.
   */
  Uni<Optional<Plan>> look(SqlClient conn, ClaimContext claim) {
    Caller caller = claim.caller();
    return guards
        .requireLive(conn, caller.instanceId())
        .chain(() -> boots.switchedOn(conn, caller.namespace()))
        .chain(
            on ->
                epochs
                    .findBoot(conn, caller.namespace(), caller.deploymentId())
                    .chain(
                        found -> {
                          // Read from the row: closed for good (not the view of a pass switched
                          // off, which an operator may switch on again).
                          found
                              .filter(boot -> !boot.open())
                              .ifPresent(
                                  boot ->
                                      closedEpochs.addBoot(
                                          caller.namespace(), caller.deploymentId(), boot.id()));
                          if (on && found.isEmpty()) {
                            // The deploy's first claim: the epoch is created in a transaction of
                            // its own (BootPasses), so concurrent first claims wait for that alone.
                            return Uni.createFrom().item(Optional.<Plan>empty());
                          }
                          // Switched off by an operator: the deploy's pass is not served (nor
                          // created); shared work (takeovers, sweeps) still is.
                          Optional<Epoch> boot = on ? found : found.map(Epoch::closedView);
                          return epochs
                              .openShared(conn, caller.namespace())
                              .chain(shared -> lookAt(conn, claim, shared, boot))
                              .map(Optional::of);
                        }));
  }

  /** The first look at the caller's epochs in order: a claimable batch or range, else a step. */
  private Uni<Plan> lookAt(
      SqlClient conn, ClaimContext claim, List<Epoch> shared, Optional<Epoch> boot) {
    List<Epoch> order = new ArrayList<>(shared);
    boot.ifPresent(order::add);
    Walk walk = Walk.start(order);
    return reletInOrder(conn, claim, walk)
        .chain(
            served ->
                served.isPresent()
                    ? Uni.createFrom().item(Plan.found(walk, served.get()))
                    : stepIfFree(conn, claim, walk));
  }

  /** A batch to re-let or a range to re-take, of the first open epoch in order that has one. */
  private Uni<Optional<Served>> reletInOrder(SqlClient conn, ClaimContext claim, Walk walk) {
    if (walk.finished()) {
      return Uni.createFrom().item(Optional.empty());
    }
    Epoch epoch = walk.epoch();
    Uni<Optional<Served>> here =
        epoch.open() ? relets.relet(conn, claim, epoch) : Uni.createFrom().item(Optional.empty());
    return here.chain(
        served ->
            served.isPresent()
                ? Uni.createFrom().item(served)
                : reletInOrder(conn, claim, walk.at(walk.next() + 1)));
  }

  /**
   * In the first transaction, after no batch was found to re-let: the step of the first open epoch,
   * if its lock can be had without waiting (else the claim queues for it in {@link EpochLocks}, as
   * claims of other epochs do). An epoch whose step could only say "not yet" is passed without its
   * lock ({@link #stillLeased}), and the next open one is tried.
   */
  private Uni<Plan> stepIfFree(SqlClient conn, ClaimContext claim, Walk from) {
    List<Epoch> order = from.order();
    int first = from.next();
    while (first < order.size() && !order.get(first).open()) {
      first++;
    }
    Walk walk = from.at(first);
    if (walk.finished()) {
      return Uni.createFrom().item(Plan.from(walk));
    }
    Epoch epoch = walk.epoch();
    if (!epoch.scanDone()) {
      return lockIfFree(conn, claim, walk)
          .chain(
              plan ->
                  plan.served().isEmpty() && plan.walk().next() == walk.next()
                      ? beforeQueueing(conn, claim, walk)
                      : Uni.createFrom().item(plan));
    }
    return stillLeased(conn, epoch)
        .chain(
            passed ->
                passed.isPresent()
                    ? stepIfFree(conn, claim, walk.past(passed.get().hint()))
                    : lockIfFree(conn, claim, walk));
  }

  /**
   * A claim about to queue for the lock of an epoch being scanned reads, without the lock, whether
   * there is room for it in the scan ({@link Scanners}): one that would find it full answers
   * without queueing (the cut checks again under the lock, where it is exact), and only an instance
   * already working the scan reads its page ahead of the lock. A claim that took the lock at once
   * read this under it instead.
   */
  private Uni<Plan> beforeQueueing(SqlClient conn, ClaimContext claim, Walk walk) {
    Epoch epoch = walk.epoch();
    if (cuts.scannerLimit() <= 0) {
      return Uni.createFrom().item(Plan.queued(walk, true));
    }
    return batches
        .scanners(conn, epoch.id(), claim.instanceId())
        .chain(
            scanners ->
                scanners.admit(cuts.scannerLimit())
                    ? Uni.createFrom().item(Plan.queued(walk, scanners.mine()))
                    : stepIfFree(conn, claim, walk.past(cuts.full(epoch, claim, scanners).hint())));
  }

  /**
   * Without the epoch's lock, for an epoch whose scan is done: what its step would serve while a
   * batch is still leased and no deferred run is due. Nothing to cut or re-check then, and the pass
   * cannot close before that batch completes (its complete closes it) or its lease expires (the
   * first look re-lets it): the step would only say when to look again. Empty when the step may do
   * more (re-check deferred runs, close the epoch): the claim takes the lock for it. At the end of
   * a pass, when a fleet's replicas wait for the last batches, their claims answer without queueing
   * for the lock, and the complete that closes the pass does not wait behind them.
   */
  private Uni<Optional<Served>> stillLeased(SqlClient conn, Epoch epoch) {
    long fenceMs = config.effectiveActivityFence().toMillis();
    return deferrals
        .due(conn, epoch, 1)
        .chain(
            due ->
                !due.isEmpty()
                    ? Uni.createFrom().item(Optional.<Served>empty())
                    : batches
                        .outstanding(conn, epoch.id(), fenceMs)
                        .map(
                            out ->
                                out.leased() > 0
                                    ? Optional.of(closing.leftOpen(epoch, out))
                                    : Optional.<Served>empty()));
  }

  /**
   * The epoch's step at once if its lock is free and no claim of this replica is queued for it;
   * else a plan that queues for the lock ({@code next} is this epoch).
   */
  private Uni<Plan> lockIfFree(SqlClient conn, ClaimContext claim, Walk walk) {
    long epochId = walk.epoch().id();
    if (!locks.idle(claim.namespace(), epochId)) {
      return Uni.createFrom().item(Plan.from(walk));
    }
    // No page is read ahead here: claims of this replica in their first look race for the lock
    // (none of them is in the lane yet), and the losers' pages would be read for nothing.
    return epochs
        .tryLock(conn, epochId)
        .chain(
            locked -> {
              if (locked.isEmpty()) {
                return Uni.createFrom().item(Plan.from(walk));
              }
              metrics.epochLock(claim.namespace(), "at-once");
              return steps
                  .visit(conn, claim, locked.get())
                  .map(s -> s.found() ? Plan.found(walk, s) : Plan.from(walk.past(s.hint())));
            });
  }
}
