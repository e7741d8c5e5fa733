package dev.rollcall.recovery;

import dev.rollcall.concurrency.Gate;
import dev.rollcall.concurrency.Lanes;
import dev.rollcall.config.RollcallConfig;
import dev.rollcall.error.DomainException;
import dev.rollcall.error.Problems.SourceUnavailable;
import dev.rollcall.metrics.RecoveryMetrics;
import dev.rollcall.recovery.Verdict.Disposition;
import dev.rollcall.registry.Caller;
import dev.rollcall.registry.InstanceGuards;
import dev.rollcall.source.RunSource;
import dev.rollcall.source.RunSources;
import dev.rollcall.source.ScannedRun;
import io.quarkus.runtime.Startup;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Pool;
import io.vertx.mutiny.sqlclient.Row;
import io.vertx.mutiny.sqlclient.SqlClient;
import io.vertx.mutiny.sqlclient.Tuple;
import jakarta.enterprise.context.ApplicationScoped;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.concurrent.CancellationException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;
import org.jboss.logging.Logger;

/**
 * Decides claims. A claim is a few short transactions. The first serves the caller's epochs in
 * order — the namespace's open takeovers (oldest first), then its deploy's boot epoch — and for
 * each:
 *
 * <ol>
 *   <li>re-leases a claimable batch (a ready batch, or one whose lease expired), skipping batches
 *       other claimers are taking at this moment; else
 *   <li>takes the epoch lock and cuts the next page of the scan into a scanning range leased to the
 *       caller (the lock covers only reading the page's ids and this one row); else
 *   <li>with the scan finished, re-checks deferred runs that are due and hands out those whose
 *       proof is gone; else
 *   <li>closes the epoch if nothing is outstanding, or moves on.
 * </ol>
 *
 * A range is then classified in a transaction of its own, outside the epoch lock, in parallel with
 * other claimers' ranges: its runs to hand out become the caller's batch (runs a live instance
 * owns, or that were recently active, are deferred). A range that hands nothing out sends the claim
 * back to the first step, in a new transaction: no transaction walks more than one page. If no
 * epoch yields a batch, the caller is told to wait (batches or deferred runs may still come back)
 * or that it is done.
 */
@ApplicationScoped
@Startup
public class ClaimService {

  private static final Logger LOG = Logger.getLogger(ClaimService.class);

  private final Pool pool;
  private final RunSources sources;
  private final Epochs epochs;
  private final Batches batches;
  private final Deferrals deferrals;
  private final Classifier classifier;
  private final TornRuns tornRuns;
  private final Ledger ledger;
  private final RollcallConfig config;
  private final RecoveryMetrics metrics;
  private final Wakeups wakeups;
  private final Lanes lanes = new Lanes();
  private final ClosedEpochs closedEpochs = new ClosedEpochs();

  /** The latest look under way of each deploy ({@link #look}), by namespace and deploy. */
  private final ConcurrentHashMap<String, LookUnderWay> looks = new ConcurrentHashMap<>();

  private final Gate gate;
  private final PassEvidence evidence;
  private final InstanceGuards guards;

  ClaimService(
      Pool pool,
      RunSources sources,
      Epochs epochs,
      Batches batches,
      Deferrals deferrals,
      Classifier classifier,
      TornRuns tornRuns,
      Ledger ledger,
      RollcallConfig config,
      RecoveryMetrics metrics,
      Wakeups wakeups,
      Gate gate,
      PassEvidence evidence,
      InstanceGuards guards) {
    this.guards = guards;
    this.wakeups = wakeups;
    this.evidence = evidence;
    this.gate = gate;
    this.pool = pool;
    this.sources = sources;
    this.epochs = epochs;
    this.batches = batches;
    this.deferrals = deferrals;
    this.classifier = classifier;
    this.tornRuns = tornRuns;
    this.ledger = ledger;
    this.config = config;
    this.metrics = metrics;
    if (config.claim().maxScanners() < 0) {
      throw new IllegalArgumentException(
          "rollcall.claim.max-scanners must be 0 (no limit) or more, not "
              + config.claim().maxScanners());
    }
  }

  /**
   * A range leased to the caller, to classify after the transaction that cut it commits. {@code
   * page} is what the cut read, or null for a range re-taken from a claimer that did not classify
   * it (then its runs are looked up again).
   */
  private record ToClassify(Epoch epoch, Batches.Range range, List<ScannedRun> page) {}

  /**
   * The result of serving one epoch: a batch, a range to classify, or nothing now (with a wait hint
   * if something may come).
   */
  private record Served(
      Optional<LeasedBatch> batch,
      Optional<ToClassify> range,
      Optional<WaitHints.Hint> hint,
      Long bootEpochId) {
    static Served batch(LeasedBatch batch) {
      return new Served(Optional.of(batch), Optional.empty(), Optional.empty(), null);
    }

    static Served range(ToClassify range) {
      return new Served(Optional.empty(), Optional.of(range), Optional.empty(), null);
    }

    static Served nothing() {
      return new Served(Optional.empty(), Optional.empty(), Optional.empty(), null);
    }

    static Served later(WaitHints.Hint wait) {
      return new Served(Optional.empty(), Optional.empty(), Optional.of(wait), null);
    }

    Served withHint(Optional<WaitHints.Hint> wait) {
      return new Served(batch, range, wait, bootEpochId);
    }

    Served withBootEpoch(Long id) {
      return new Served(batch, range, hint, id);
    }
  }

  /**
   * One step under an epoch's lock: either what the claim gets from this epoch ({@code served}), or
   * the epoch to take the next step on ({@code again}: its scan just finished, or re-checked runs
   * handed nothing out).
   */
  private record Step(Served served, Epoch again) {
    static Step done(Served served) {
      return new Step(served, null);
    }

    static Step again(Epoch epoch) {
      return new Step(null, epoch);
    }
  }

  /** Claims up to {@code maxRuns} runs for the caller. */
  public Uni<ClaimResult> claim(Caller caller, int maxRuns) {
    return claim(caller, maxRuns, Duration.ZERO, false);
  }

  /**
   * Claims up to {@code maxRuns} runs for the caller, holding the answer up to {@code hold} while
   * it would be {@code wait} (and, when {@code idle}, {@code done}): the claim is woken at once
   * when a batch becomes claimable or an epoch closes, on any service replica ({@link Wakeups}),
   * and looks again when the wait hint says something may change.
   */
  public Uni<ClaimResult> claim(Caller caller, int maxRuns, Duration hold, boolean idle) {
    long started = System.nanoTime();
    // The hold is a request deadline, not a lease: the service's monotonic clock is right for it.
    long deadline = started + hold.toNanos();
    Wakeups.Hold place = wakeups.hold(caller.namespace(), caller.deploymentId());
    return held(caller, place, maxRuns, deadline, idle)
        // A claim that fails, or whose caller hangs up, leaves the waiting room at once and
        // passes on a wake it did not use.
        .onFailure()
        .invoke(place::abandoned)
        .onCancellation()
        .invoke(place::abandoned)
        .invoke(
            result -> {
              metrics.claim(caller.namespace(), Duration.ofNanos(System.nanoTime() - started));
              if (result instanceof ClaimResult.Batch b) {
                LeasedBatch batch = b.batch();
                metrics.batch(caller.namespace(), batch.fence() > 1 ? "expired" : "leased");
                batch.runs().stream()
                    .collect(Collectors.groupingBy(r -> r.reason().wire(), Collectors.counting()))
                    .forEach(
                        (reason, n) -> metrics.runs(caller.namespace(), "handed-out", reason, n));
              }
            });
  }

  /** Claims of this replica queued behind the one holding (or taking) an epoch's lock; a glance. */
  int queuedForLock(long epochId) {
    return lanes.queued(epochId);
  }

  private Uni<ClaimResult> held(
      Caller caller, Wakeups.Hold place, int maxRuns, long deadline, boolean idle) {
    boolean holds = deadline - System.nanoTime() > 0;
    // Registered before looking, so that a notice sent after the look is not missed.
    Wakeups.Waiter w = holds ? place.look() : null;
    if (holds && w == null) {
      // The caller hung up while the claim napped: no one is left to answer.
      return Uni.createFrom().failure(new CancellationException("the claim's caller hung up"));
    }
    return look(caller, maxRuns, place.wokenTogether())
        .chain(
            result -> {
              boolean waits =
                  result instanceof ClaimResult.Wait
                      || (idle && result instanceof ClaimResult.Done);
              long left = deadline - System.nanoTime();
              if (w == null || !waits || left <= 0) {
                place.answered(
                    result instanceof ClaimResult.Batch,
                    result instanceof ClaimResult.Batch b
                        && b.batch().epochKind() == EpochKind.BOOT);
                return Uni.createFrom().item(result);
              }
              long nap =
                  result instanceof ClaimResult.Wait wait
                      ? Math.min(wait.napMs(), Duration.ofNanos(left).toMillis())
                      : Duration.ofNanos(left).toMillis();
              return w.await(Duration.ofMillis(Math.max(1, nap)))
                  .invoke(place::napped)
                  .chain(() -> held(caller, place, maxRuns, deadline, idle));
            });
  }

  /**
   * A claim's look that began at {@code started} (monotonic clock), its answer shared; {@code
   * sharing}: the other claims waiting for that answer now.
   */
  private record LookUnderWay(long started, Uni<ClaimResult> answer, AtomicInteger sharing) {}

  /** Claims of this replica waiting for the answer of a look of the deploy now; a glance. */
  int sharingLook(String namespace, String deploymentId) {
    LookUnderWay under = looks.get(ClosedEpochs.deploy(namespace, deploymentId));
    return under == null ? 0 : under.sharing().get();
  }

  /**
   * One look of a held claim. A notice that an epoch closed wakes every waiting claim of the deploy
   * at once, and each would read the same thing from the database: the deploy's pass is over. So a
   * woken claim ({@code wokenTogether}, 0 if it was not) takes the answer of a look of its deploy
   * that began after it was woken, when that answer is {@code done}, and looks for itself when it
   * is anything else. {@code done} does not depend on the instance that asked (it carries no batch
   * and no hint: no epoch of the deploy's namespace had anything for the deploy), and the look it
   * shares read the database after the notice, as the claim's own look would have. It also reads no
   * liveness: an instance fenced meanwhile is told "done" (no lease, no work) and learns that it
   * was fenced at its next heartbeat. At the end of a pass, a service replica's woken claims cost
   * one look instead of one each.
   */
  private Uni<ClaimResult> look(Caller caller, int maxRuns, long wokenTogether) {
    String deploy = ClosedEpochs.deploy(caller.namespace(), caller.deploymentId());
    LookUnderWay under = looks.get(deploy);
    if (wokenTogether != 0 && under != null && under.started() - wokenTogether >= 0) {
      under.sharing().incrementAndGet();
      return under
          .answer()
          .onTermination()
          .invoke(under.sharing()::decrementAndGet)
          .onFailure()
          .recoverWithNull()
          .chain(
              answer -> {
                if (answer instanceof ClaimResult.Done) {
                  metrics.lookShared(caller.namespace());
                  return Uni.createFrom().item(answer);
                }
                return decide(caller, maxRuns);
              });
    }
    LookUnderWay mine =
        new LookUnderWay(
            System.nanoTime(),
            decide(caller, maxRuns).memoize().indefinitely(),
            new AtomicInteger());
    looks.put(deploy, mine);
    return mine.answer().onTermination().invoke(() -> looks.remove(deploy, mine));
  }

  private Uni<ClaimResult> decide(Caller caller, int maxRuns) {
    OptionalLong closedBoot = closedEpochs.bootOf(caller.namespace(), caller.deploymentId());
    if (closedBoot.isEmpty()) {
      return lookInTransactions(caller, maxRuns);
    }
    return passOver(caller, closedBoot.getAsLong())
        .chain(
            done ->
                done.isPresent()
                    ? Uni.createFrom().item(done.get())
                    : lookInTransactions(caller, maxRuns));
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
   * ({@link #look}); the instance learns it was fenced at its next heartbeat or claim.
   */
  private Uni<Optional<ClaimResult>> passOver(Caller caller, long bootEpochId) {
    return pool.preparedQuery(PASS_OVER)
        .execute(Tuple.of(caller.instanceId(), caller.namespace(), bootEpochId))
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
   * {@link #passOver}'s read: $1 the instance, $2 its namespace, $3 its deploy's closed boot epoch.
   * The shared epochs are those {@link Epochs#openShared} reads ({@link Epochs#OPEN_SHARED}).
   */
  static final String PASS_OVER =
      "SELECT rollcall.is_live(i.state, i.lease_expires_at) AS live,"
          + " EXISTS (SELECT 1 FROM rollcall.epochs b WHERE b.id = $3) AS kept,"
          + " EXISTS (SELECT 1 FROM rollcall.epochs WHERE namespace = $2 AND "
          + Epochs.OPEN_SHARED
          + ") AS shared_open"
          + " FROM rollcall.instances i WHERE i.id = $1";

  /** A claim's look through its transactions: the first look, then the epochs' locks. */
  private Uni<ClaimResult> lookInTransactions(Caller caller, int maxRuns) {
    RunSource source = sources.get(caller.namespace());
    // Each transaction of a claim takes a permit of the gate for as long as it holds a pooled
    // connection, and no longer: a claim waiting for work, or for its turn at an epoch's lock,
    // holds none, so completes and other claims' transactions never queue behind it. Its later
    // transactions (the cut, the classification) go ahead of new claims' first looks.
    return gate.run(() -> pool.withTransaction(conn -> firstLook(conn, source, caller, maxRuns)))
        .chain(
            plan ->
                plan.isEmpty()
                    ? openBoot(source, caller).chain(() -> decide(caller, maxRuns))
                    : serve(source, caller, plan.get(), maxRuns));
  }

  /**
   * The rest of a claim after its first look: the epochs' locks, then the range's classification.
   */
  private Uni<ClaimResult> serve(RunSource source, Caller caller, Plan plan, int maxRuns) {
    Uni<Served> look =
        plan.served().isPresent()
            ? Uni.createFrom().item(plan.served().get())
            : underLocks(
                source, caller, plan.order(), plan.next(), maxRuns, plan.hint(), plan.readAhead());
    return look.chain(
        served -> {
          if (served.batch().isPresent()) {
            return Uni.createFrom().item(new ClaimResult.Batch(served.batch().get()));
          }
          if (served.range().isEmpty()) {
            return Uni.createFrom().item(answer(served.hint(), served.bootEpochId()));
          }
          // The epoch lock is released: classify the range in a transaction of its own.
          return gate.runAhead(
                  () ->
                      pool.withTransaction(
                          conn -> classify(conn, source, caller, served.range().get(), maxRuns)))
              .chain(
                  batch ->
                      batch.isPresent()
                          ? Uni.createFrom().item(new ClaimResult.Batch(batch.get()))
                          // Nothing to hand out in that range (or it was lost): next step.
                          : decide(caller, maxRuns));
        });
  }

  private ClaimResult answer(Optional<WaitHints.Hint> wait, Long bootEpochId) {
    return wait.<ClaimResult>map(
            hint -> {
              long retryAfterMs = waitHint(hint.ms());
              return new ClaimResult.Wait(retryAfterMs, WaitHints.nap(hint, retryAfterMs));
            })
        .orElse(new ClaimResult.Done(bootEpochId));
  }

  /**
   * The epochs a claim serves, in order, and what its first transaction found: a batch or a range
   * ({@code served}), or else the index of the epoch to take the lock of next ({@code next}), with
   * the soonest wait hint of the epochs before it ({@code hint}), and the epoch whose next page may
   * be read ahead of its lock ({@code readAhead}, 0 for none; {@link #lockAndStep}).
   */
  private record Plan(
      List<Epoch> order,
      Optional<Served> served,
      int next,
      Optional<WaitHints.Hint> hint,
      long readAhead) {
    static Plan found(List<Epoch> order, Served served) {
      return new Plan(order, Optional.of(served), order.size(), Optional.empty(), 0);
    }

    static Plan from(List<Epoch> order, int next, Optional<WaitHints.Hint> hint) {
      return new Plan(order, Optional.empty(), next, hint, 0);
    }

    static Plan queued(
        List<Epoch> order, int next, Optional<WaitHints.Hint> hint, boolean readAhead) {
      return new Plan(order, Optional.empty(), next, hint, readAhead ? order.get(next).id() : 0);
    }
  }

  /**
   * The first transaction of a claim: the caller's epochs in order, and a claimable batch or range
   * of any of them if there is one. With none, it takes the first open epoch's step at once if that
   * epoch's lock is free and no claim of this replica is queued for it: a lone claimer cuts its
   * page in this transaction, not in one more. Empty when the caller's deploy has no boot epoch
   * yet: the claim creates it ({@link #openBoot}) and looks again.
   */
  private Uni<Optional<Plan>> firstLook(
      SqlClient conn, RunSource source, Caller caller, int maxRuns) {
    return guards
        .requireLive(conn, caller.instanceId())
        .chain(() -> bootRecoveryOn(conn, caller.namespace()))
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
                            // its own (openBoot), so concurrent first claims wait for that alone.
                            return Uni.createFrom().item(Optional.<Plan>empty());
                          }
                          // Switched off by an operator: the deploy's pass is not served (nor
                          // created); shared work (takeovers, sweeps) still is.
                          Optional<Epoch> boot = on ? found : found.map(Epoch::closedView);
                          return epochs
                              .openShared(conn, caller.namespace())
                              .chain(shared -> lookAt(conn, source, caller, shared, boot, maxRuns))
                              .map(Optional::of);
                        }));
  }

  /** The first look at the caller's epochs in order: a claimable batch or range, else a step. */
  private Uni<Plan> lookAt(
      SqlClient conn,
      RunSource source,
      Caller caller,
      List<Epoch> shared,
      Optional<Epoch> boot,
      int maxRuns) {
    List<Epoch> order = new ArrayList<>(shared);
    boot.ifPresent(order::add);
    Long bootId = boot.map(Epoch::id).orElse(null);
    return reletInOrder(conn, source, caller, order, 0)
        .chain(
            served ->
                served.isPresent()
                    ? Uni.createFrom().item(Plan.found(order, served.get().withBootEpoch(bootId)))
                    : stepIfFree(conn, source, caller, order, 0, Optional.empty(), maxRuns));
  }

  /**
   * In the first transaction, after no batch was found to re-let: the step of the first open epoch,
   * if its lock can be had without waiting (else the claim queues for it in {@link #underLocks}, as
   * claims of other epochs do). An epoch whose step could only say "not yet" is passed without its
   * lock ({@link #stillLeased}), and the next open one is tried.
   */
  private Uni<Plan> stepIfFree(
      SqlClient conn,
      RunSource source,
      Caller caller,
      List<Epoch> order,
      int from,
      Optional<WaitHints.Hint> hint,
      int maxRuns) {
    int first = from;
    while (first < order.size() && !order.get(first).open()) {
      first++;
    }
    if (first == order.size()) {
      return Uni.createFrom().item(Plan.from(order, first, hint));
    }
    int index = first;
    Epoch epoch = order.get(index);
    if (!epoch.scanDone()) {
      return lockIfFree(conn, source, caller, order, index, hint, maxRuns)
          .chain(
              plan ->
                  plan.served().isEmpty() && plan.next() == index
                      ? beforeQueueing(conn, source, caller, order, index, hint, maxRuns)
                      : Uni.createFrom().item(plan));
    }
    return stillLeased(conn, epoch)
        .chain(
            passed ->
                passed.isPresent()
                    ? stepIfFree(
                        conn,
                        source,
                        caller,
                        order,
                        index + 1,
                        WaitHints.sooner(passed.get().hint(), hint),
                        maxRuns)
                    : lockIfFree(conn, source, caller, order, index, hint, maxRuns));
  }

  /**
   * A claim about to queue for the lock of an epoch being scanned reads, without the lock, whether
   * there is room for it in the scan ({@link Batches.Scanners}): one that would find it full
   * answers without queueing (the cut checks again under the lock, where it is exact), and only an
   * instance already working the scan reads its page ahead of the lock. A claim that took the lock
   * at once read this under it instead.
   */
  private Uni<Plan> beforeQueueing(
      SqlClient conn,
      RunSource source,
      Caller caller,
      List<Epoch> order,
      int index,
      Optional<WaitHints.Hint> hint,
      int maxRuns) {
    Epoch epoch = order.get(index);
    if (scannerLimit() <= 0) {
      return Uni.createFrom().item(Plan.queued(order, index, hint, true));
    }
    return batches
        .scanners(conn, epoch.id(), caller.instanceId())
        .chain(
            scanners ->
                scanners.admit(scannerLimit())
                    ? Uni.createFrom().item(Plan.queued(order, index, hint, scanners.mine()))
                    : stepIfFree(
                        conn,
                        source,
                        caller,
                        order,
                        index + 1,
                        WaitHints.sooner(full(epoch, caller, scanners).hint(), hint),
                        maxRuns));
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
        .due(conn, epoch.id(), fenceMs, 1)
        .chain(
            due ->
                !due.isEmpty()
                    ? Uni.createFrom().item(Optional.<Served>empty())
                    : batches
                        .outstanding(conn, epoch.id(), fenceMs)
                        .map(
                            out ->
                                out.leased() > 0
                                    ? Optional.of(leftOpen(epoch, out))
                                    : Optional.<Served>empty()));
  }

  /**
   * The epoch's step at once if its lock is free and no claim of this replica is queued for it;
   * else a plan that queues for the lock ({@code next} is this epoch).
   */
  private Uni<Plan> lockIfFree(
      SqlClient conn,
      RunSource source,
      Caller caller,
      List<Epoch> order,
      int index,
      Optional<WaitHints.Hint> hint,
      int maxRuns) {
    if (!lanes.idle(order.get(index).id())) {
      return Uni.createFrom().item(Plan.from(order, index, hint));
    }
    // No page is read ahead here: claims of this replica in their first look race for the lock
    // (none of them is in the lane yet), and the losers' pages would be read for nothing.
    return epochs
        .tryLock(conn, order.get(index).id())
        .chain(
            locked -> {
              if (locked.isEmpty()) {
                return Uni.createFrom().item(Plan.from(order, index, hint));
              }
              metrics.epochLock(caller.namespace(), "at-once");
              return underLock(conn, source, caller, locked.get(), maxRuns)
                  .map(
                      s ->
                          s.batch().isPresent() || s.range().isPresent()
                              ? Plan.found(order, s)
                              : Plan.from(order, index + 1, WaitHints.sooner(s.hint(), hint)));
            });
  }

  private Uni<Optional<Served>> reletInOrder(
      SqlClient conn, RunSource source, Caller caller, List<Epoch> order, int index) {
    if (index == order.size()) {
      return Uni.createFrom().item(Optional.empty());
    }
    Epoch epoch = order.get(index);
    Uni<Optional<Served>> here =
        epoch.open() ? relet(conn, source, caller, epoch) : Uni.createFrom().item(Optional.empty());
    return here.chain(
        served ->
            served.isPresent()
                ? Uni.createFrom().item(served)
                : reletInOrder(conn, source, caller, order, index + 1));
  }

  /**
   * Serves the epochs in order under their locks, one short transaction each, until one yields a
   * batch or a range. Claims of one service replica queue for an epoch's lock in memory ({@link
   * Lanes}), not on a pooled connection, so waiting claimers never starve heartbeats of
   * connections.
   */
  private Uni<Served> underLocks(
      RunSource source,
      Caller caller,
      List<Epoch> order,
      int index,
      int maxRuns,
      Optional<WaitHints.Hint> hint,
      long readAhead) {
    Long bootId =
        order.stream()
            .filter(e -> e.kind() == EpochKind.BOOT)
            .map(Epoch::id)
            .findFirst()
            .orElse(null);
    if (index == order.size()) {
      return Uni.createFrom().item(Served.nothing().withHint(hint).withBootEpoch(bootId));
    }
    Epoch epoch = order.get(index);
    Uni<Served> here =
        !epoch.open()
            ? Uni.createFrom().item(Served.nothing())
            : lanes.run(
                epoch.id(),
                () ->
                    // A claim ahead in the lane found the epoch closed: nothing to lock it for.
                    closedEpochs.contains(epoch.id())
                        ? Uni.createFrom()
                            .item(Served.nothing())
                            .invoke(() -> metrics.epochLock(caller.namespace(), "skipped"))
                        : gate.runAhead(
                            () ->
                                pool.withTransaction(
                                    conn ->
                                        lockAndStep(
                                            conn,
                                            source,
                                            caller,
                                            epoch,
                                            maxRuns,
                                            epoch.id() == readAhead))));
    return here.chain(
        served -> {
          if (served.batch().isPresent() || served.range().isPresent()) {
            return Uni.createFrom().item(served);
          }
          Optional<WaitHints.Hint> sooner = WaitHints.sooner(served.hint(), hint);
          return underLocks(source, caller, order, index + 1, maxRuns, sooner, readAhead);
        });
  }

  /**
   * Takes an epoch's lock, waiting for it, and takes the epoch's step. While the epoch is being
   * scanned and the caller may read ahead (it already works the scan, or the scan is open to any
   * number of instances), the next page is read in the same round trip as the lock (pipelined right
   * behind it, after the cursor the lock's last holder committed), so the lock is held for the cut
   * and its commit only; the page is dropped if the locked epoch has nothing to cut after all, or
   * no room for the caller ({@link Batches.Scanners}). Other claims may find the scan full under
   * the lock, so they read no page before they know.
   */
  private Uni<Served> lockAndStep(
      SqlClient conn, RunSource source, Caller caller, Epoch view, int maxRuns, boolean readAhead) {
    if (!scansAhead(view) || !(readAhead || scannerLimit() <= 0)) {
      return guards
          .requireLive(conn, caller.instanceId())
          .chain(() -> epochs.lock(conn, view.id()))
          .invoke(this::rememberIfClosed)
          .invoke(() -> metrics.epochLock(caller.namespace(), "queued"))
          .chain(locked -> underLock(conn, source, caller, locked, maxRuns));
    }
    // Fail fast, not collecting failures: the liveness check's 410 comes first and is the answer.
    return Uni.combine()
        .all()
        .unis(
            guards.requireLive(conn, caller.instanceId()).replaceWith(true),
            epochs.lock(conn, view.id()),
            batches.scanners(conn, view.id(), caller.instanceId()),
            unavailableIfFails(
                source,
                source.pageAfterEpochCursor(
                    conn, view.snapshot(), view.id(), maxRuns, config.effectiveActivityFence())))
        .asTuple()
        .invoke(t -> rememberIfClosed(t.getItem2()))
        .invoke(() -> metrics.epochLock(caller.namespace(), "queued"))
        .chain(
            t ->
                stepWithPage(
                    conn, source, caller, t.getItem2(), t.getItem3(), t.getItem4(), maxRuns));
  }

  /**
   * The epoch's row read under its lock is the committed one: if it says closed, the claims queued
   * behind this one in the epoch's lane need not take the lock ({@link ClosedEpochs}).
   */
  private void rememberIfClosed(Epoch locked) {
    if (!locked.open()) {
      closedEpochs.add(locked.id());
    }
  }

  /**
   * Holding the epoch lock, with a page read ahead of it: cut that page if the epoch is still being
   * scanned (the page was read after the cursor the lock protects, so it is the next one), else
   * drop it and take the epoch's step.
   */
  private Uni<Served> stepWithPage(
      SqlClient conn,
      RunSource source,
      Caller caller,
      Epoch locked,
      Batches.Scanners scanners,
      List<ScannedRun> page,
      int maxRuns) {
    if (!scansAhead(locked)) {
      return underLock(conn, source, caller, locked, maxRuns);
    }
    if (!scanners.admit(scannerLimit())) {
      return Uni.createFrom().item(full(locked, caller, scanners));
    }
    return untilServed(conn, source, caller, cutPage(conn, caller, locked, page, maxRuns), maxRuns);
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

  private Uni<Boolean> bootRecoveryOn(SqlClient conn, String namespace) {
    return conn.preparedQuery(
            "SELECT boot_recovery FROM rollcall.namespace_settings WHERE namespace = $1")
        .execute(Tuple.of(namespace))
        .map(rows -> rows.size() == 0 || rows.iterator().next().getBoolean("boot_recovery"));
  }

  /**
   * Creates the deploy's boot epoch, unless a concurrent first claim did, in one short transaction:
   * the snapshot bound, the row and the source's preparation of its evidence. Concurrent first
   * claims of the deploy, on any service replica, wait on the row's unique key for this transaction
   * and no longer. The creator's claim does not wait for the close of the passes the new one
   * supersedes either ({@link #closeSupersededLater}).
   */
  private Uni<Void> openBoot(RunSource source, Caller caller) {
    return gate.run(
            () ->
                pool.withTransaction(
                    conn ->
                        guards
                            .requireLive(conn, caller.instanceId())
                            .chain(() -> unavailableIfFails(source, source.snapshot(conn)))
                            .chain(
                                snapshot ->
                                    epochs.createBoot(
                                        conn,
                                        caller.namespace(),
                                        caller.deploymentId(),
                                        snapshot,
                                        caller.instanceId()))
                            .call(
                                created ->
                                    created.isPresent()
                                        ? source.prepareEpoch(conn, created.get())
                                        : Uni.createFrom().voidItem())))
        .invoke(created -> created.ifPresent(id -> closeSupersededLater(caller.namespace(), id)))
        .replaceWithVoid();
  }

  /**
   * Closes the passes a new boot epoch supersedes, once it has committed, in a transaction of its
   * own that its creator's claim does not wait for: closing waits for each old epoch's lock, which
   * the old deploy's claimers hold while they cut pages (hundreds of milliseconds under load, all
   * of it added to the creator's claim when it waited). The new pass serves meanwhile; the periodic
   * check closes what this could not.
   */
  private void closeSupersededLater(String namespace, long created) {
    gate.runAhead(() -> pool.withTransaction(conn -> epochs.closeSuperseded(conn, namespace)))
        .subscribe()
        .with(
            ignored -> {},
            e ->
                LOG.warnf(
                    "boot epoch %d of namespace %s: older passes not closed yet (%s); the"
                        + " stranded-epoch check retries",
                    created, namespace, e.toString()));
  }

  /**
   * Re-leases the oldest claimable batch, giving up batches that were handed out too often; a
   * scanning range whose claimer did not classify it in time is taken over to classify.
   */
  private Uni<Optional<Served>> relet(
      SqlClient conn, RunSource source, Caller caller, Epoch epoch) {
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
                    .retakeRange(conn, batch, caller.instanceId(), leaseMs())
                    .map(range -> Optional.of(Served.range(new ToClassify(epoch, range, null))));
              }
              if (batch.exhausted(config.batch().maxAttempts())) {
                return batches.abandon(conn, batch).chain(() -> relet(conn, source, caller, epoch));
              }
              return batches
                  .relet(conn, source, epoch, batch, caller.instanceId(), leaseMs())
                  .map(leased -> Optional.of(Served.batch(leased)));
            });
  }

  /**
   * Holding the epoch lock, the loop of a claim's visit to one epoch: take a {@link #step}; while
   * it says {@code again} (the scan just finished, or re-checked runs handed nothing out), take the
   * next one on the epoch as it now is. Every {@code again} moves the epoch on (its scan is done,
   * or due deferred runs were resolved), so the loop ends.
   */
  private Uni<Served> underLock(
      SqlClient conn, RunSource source, Caller caller, Epoch epoch, int maxRuns) {
    return untilServed(conn, source, caller, step(conn, source, caller, epoch, maxRuns), maxRuns);
  }

  /**
   * What a step served, or, if it says {@code again}, the rest of the visit ({@link #underLock}).
   */
  private Uni<Served> untilServed(
      SqlClient conn, RunSource source, Caller caller, Uni<Step> step, int maxRuns) {
    return step.chain(
        s ->
            s.again() == null
                ? Uni.createFrom().item(s.served())
                : underLock(conn, source, caller, s.again(), maxRuns));
  }

  /** One step under the epoch lock: cut a page, else re-let, else re-check deferred runs. */
  private Uni<Step> step(
      SqlClient conn, RunSource source, Caller caller, Epoch epoch, int maxRuns) {
    if (!epoch.open()) {
      return Uni.createFrom().item(Step.done(Served.nothing()));
    }
    if (!epoch.scanDone()) {
      int allowed = rateLimited(epoch, maxRuns);
      if (allowed <= 0) {
        // A sweep ahead of its rate: the claimer comes back when a heartbeat says so.
        return Uni.createFrom().item(Step.done(Served.nothing()));
      }
      return batches
          .scanners(conn, epoch.id(), caller.instanceId())
          .chain(
              scanners ->
                  scanners.admit(scannerLimit())
                      ? cutRange(conn, source, caller, epoch, allowed)
                      : Uni.createFrom().item(Step.done(full(epoch, caller, scanners))));
    }
    // A lease may have expired since the first look; the epoch lock does not cover batches.
    return relet(conn, source, caller, epoch)
        .chain(
            served ->
                served.isPresent()
                    ? Uni.createFrom().item(Step.done(served.get()))
                    : recheckDeferred(conn, source, caller, epoch, maxRuns));
  }

  /**
   * Holding the epoch lock: reads the next page's runs and leases them to the caller as a scanning
   * range, and moves the cursor past them. An empty page finishes the scan: the next step is on the
   * finished epoch.
   */
  private Uni<Step> cutRange(
      SqlClient conn, RunSource source, Caller caller, Epoch epoch, int maxRuns) {
    Uni<List<ScannedRun>> read =
        source.page(
            conn, epoch.snapshot(), epoch.cursor(), maxRuns, config.effectiveActivityFence());
    return unavailableIfFails(source, read)
        .chain(page -> cutPage(conn, caller, epoch, page, maxRuns));
  }

  /**
   * Holding the epoch lock: moves the cursor past a page read after it, and leases the page's runs
   * to the caller as a scanning range. The two statements are pipelined (one round trip).
   */
  private Uni<Step> cutPage(
      SqlClient conn, Caller caller, Epoch epoch, List<ScannedRun> page, int maxRuns) {
    boolean last = page.size() < maxRuns;
    Optional<String> cursor =
        page.isEmpty() ? epoch.cursor() : Optional.of(page.get(page.size() - 1).runId());
    Epoch advanced = epoch.advancedTo(cursor, last, page.size());
    Uni<Void> moved = epochs.advance(conn, epoch.id(), cursor, last, page.size());
    if (page.isEmpty()) {
      return moved.replaceWith(Step.again(advanced));
    }
    List<String> ids = page.stream().map(ScannedRun::runId).toList();
    return Uni.combine()
        .all()
        .unis(
            moved.replaceWith(true),
            batches.cutRange(conn, advanced, ids, caller.instanceId(), leaseMs()))
        .asTuple()
        .map(t -> Step.done(Served.range(new ToClassify(advanced, t.getItem2(), page))));
  }

  /**
   * Classifies a range leased to the caller, outside the epoch lock: writes its deferrals and
   * skips, and turns it into the caller's batch of the runs to hand out. Empty when it hands out
   * nothing, or when the range's lease was lost to another claimer (then nothing is written).
   */
  /** The runs a pass hands out, their torn writes mended before the batch is visible. */
  private Uni<?> mendTorn(SqlClient conn, RunSource source, Epoch epoch, List<Verdict> verdicts) {
    return tornRuns.pass(conn, source, epoch.id(), verdicts);
  }

  private Uni<Optional<LeasedBatch>> classify(
      SqlClient conn, RunSource source, Caller caller, ToClassify work, int maxRuns) {
    Epoch epoch = work.epoch();
    // A range whose classification failed (or whose claimers died) maxAttempts times running is
    // a poison range: its runs are handed out unclassified (fail open), so it cannot hold its
    // epoch open for ever.
    boolean failOpen = work.range().poison(config.batch().maxAttempts());
    return guards
        .requireLive(conn, caller.instanceId())
        .chain(() -> rangeRuns(conn, source, work))
        .chain(
            known ->
                (failOpen
                        ? Uni.createFrom().item(unclassified(work.range(), known.active()))
                        : classifier.firstLook(conn, source, epoch, known.active()))
                    .call(verdicts -> mendTorn(conn, source, epoch, verdicts))
                    .map(
                        verdicts -> {
                          List<Verdict> all = new ArrayList<>(verdicts);
                          all.addAll(known.gone());
                          return all;
                        }))
        .chain(
            verdicts ->
                batches
                    .settleRange(
                        conn,
                        epoch,
                        work.range(),
                        handedOut(source, of(verdicts, Disposition.HAND_OUT)),
                        caller.instanceId(),
                        leaseMs())
                    .chain(
                        settled ->
                            settled.isEmpty()
                                ? Uni.createFrom().item(Optional.<LeasedBatch>empty())
                                : record(conn, epoch, verdicts).replaceWith(settled.get())));
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

  private Uni<RangeRuns> rangeRuns(SqlClient conn, RunSource source, ToClassify work) {
    if (work.page() != null) {
      return Uni.createFrom().item(new RangeRuns(work.page(), List.of()));
    }
    // A range re-taken from a claimer that did not classify it: read its runs again.
    return unavailableIfFails(
            source, source.lookup(conn, work.range().runIds(), config.effectiveActivityFence()))
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

  /** Writes a page's verdicts that are not hand-outs: deferrals and skips, to the ledger. */
  private Uni<Void> record(SqlClient conn, Epoch epoch, List<Verdict> verdicts) {
    count(epoch.namespace(), "deferred", of(verdicts, Disposition.DEFER));
    count(epoch.namespace(), "skipped", of(verdicts, Disposition.SKIP));
    return deferrals
        .defer(conn, epoch, of(verdicts, Disposition.DEFER))
        .chain(() -> ledger.record(conn, epoch, of(verdicts, Disposition.SKIP), "skipped", null));
  }

  private void count(String namespace, String verdict, List<Verdict> verdicts) {
    verdicts.stream()
        .collect(Collectors.groupingBy(v -> v.reason().wire(), Collectors.counting()))
        .forEach((reason, n) -> metrics.runs(namespace, verdict, reason, n));
  }

  /**
   * Holding the epoch lock: leases re-checked runs to the caller as a new batch; with none, the
   * next step is on the same epoch.
   */
  private Uni<Step> handOut(
      SqlClient conn, RunSource source, Caller caller, Epoch epoch, List<Verdict> runs) {
    if (runs.isEmpty()) {
      return Uni.createFrom().item(Step.again(epoch));
    }
    return batches
        .cut(conn, epoch, handedOut(source, runs), caller.instanceId(), leaseMs())
        .map(batch -> Step.done(Served.batch(batch)));
  }

  private static List<HandedOutRun> handedOut(RunSource source, List<Verdict> runs) {
    List<HandedOutRun> handed = new ArrayList<>(runs.size());
    for (Verdict v : runs) {
      handed.add(
          new HandedOutRun(
              v.runId(),
              v.workflowName(),
              source.queueName(v.workflowName()),
              v.reason(),
              v.deadInstanceId(),
              v.messageId()));
    }
    return handed;
  }

  /**
   * The scan is finished: deferred runs whose re-check is due are skipped for good (still owned,
   * still active, finished) or handed out; when none is due, close the epoch or report when to look
   * again.
   */
  private Uni<Step> recheckDeferred(
      SqlClient conn, RunSource source, Caller caller, Epoch epoch, int maxRuns) {
    long fenceMs = config.effectiveActivityFence().toMillis();
    return deferrals
        .due(conn, epoch.id(), fenceMs, maxRuns)
        .chain(
            due -> {
              if (due.isEmpty()) {
                return closeOrWait(conn, epoch).map(Step::done);
              }
              return unavailableIfFails(
                      source,
                      classifier
                          .recheck(conn, source, epoch, due)
                          .call(verdicts -> mendTorn(conn, source, epoch, verdicts)))
                  .chain(
                      verdicts ->
                          deferrals
                              .resolve(conn, epoch, due)
                              .chain(() -> record(conn, epoch, verdicts))
                              .chain(
                                  () ->
                                      handOut(
                                          conn,
                                          source,
                                          caller,
                                          epoch,
                                          of(verdicts, Disposition.HAND_OUT))));
            });
  }

  /**
   * Closes the epoch if nothing is outstanding; otherwise what the claimer gets ({@link
   * #leftOpen}).
   */
  private Uni<Served> closeOrWait(SqlClient conn, Epoch epoch) {
    return epochs
        .closeIfFinished(conn, epoch.id())
        // The pass's evidence goes once this claim's transaction has committed the close: the
        // close, and the notice that the pass is over, do not wait for the delete.
        .invoke(
            closed -> {
              if (closed) {
                evidence.forgetOnceCommitted(conn, epoch.id());
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
  private Served leftOpen(Epoch epoch, Batches.Outstanding out) {
    return epoch.kind() == EpochKind.BOOT
        ? Served.later(WaitHints.Hint.at(out.msUntilNextLook(config.claim().waitMin().toMillis())))
        : Served.nothing();
  }

  /**
   * What a claim gets from a scan that {@code rollcall.claim.max-scanners} other instances work: on
   * a boot epoch, a wait until one of them leaves the scan (the notice of its last lease ending
   * wakes the claim; failing that, it looks again when their first lease could expire); on a sweep,
   * nothing for now, as when a sweep is ahead of its rate.
   */
  private Served full(Epoch epoch, Caller caller, Batches.Scanners scanners) {
    metrics.scanFull(caller.namespace());
    return epoch.kind() == EpochKind.BOOT
        ? Served.later(WaitHints.Hint.announcedBy(scanners.msUntilFirstExpiry()))
        : Served.nothing();
  }

  private int scannerLimit() {
    return config.claim().maxScanners();
  }

  /**
   * How many runs this claim may scan: a sweep may read at most {@code max-runs-per-second} times
   * its age (by the database's clock), so it never floods the engine's queue.
   */
  private int rateLimited(Epoch epoch, int maxRuns) {
    if (epoch.kind() != EpochKind.SWEEP) {
      return maxRuns;
    }
    int allowed =
        SweepRate.allowed(
            epoch.kind(),
            config.sweep().maxRunsPerSecond(),
            epoch.ageMs(),
            epoch.runsScanned(),
            maxRuns);
    if (allowed < maxRuns) {
      metrics.sweepRateLimited(epoch.namespace());
    }
    return allowed;
  }

  private static List<Verdict> of(List<Verdict> verdicts, Disposition disposition) {
    return verdicts.stream().filter(v -> v.disposition() == disposition).toList();
  }

  /** A failure to read the source is the source's problem (503), not an internal error. */
  private static <T> Uni<T> unavailableIfFails(RunSource source, Uni<T> read) {
    return read.onFailure(e -> !(e instanceof DomainException))
        .transform(e -> new SourceUnavailable(source.namespace(), e.getMessage()));
  }

  private long waitHint(long msUntilNextChange) {
    return WaitHints.hint(
        config.claim().waitMin().toMillis(),
        config.claim().waitMax().toMillis(),
        msUntilNextChange,
        ThreadLocalRandom.current());
  }

  private long leaseMs() {
    return config.batch().lease().toMillis();
  }
}
