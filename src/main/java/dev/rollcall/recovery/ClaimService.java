package dev.rollcall.recovery;

import dev.rollcall.concurrency.Gate;
import dev.rollcall.config.RollcallConfig;
import dev.rollcall.database.Databases;
import dev.rollcall.metrics.RecoveryMetrics;
import dev.rollcall.registry.Caller;
import dev.rollcall.source.RunSources;
import io.quarkus.runtime.Startup;
import io.smallrye.mutiny.Uni;
import jakarta.enterprise.context.ApplicationScoped;
import java.time.Duration;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.concurrent.CancellationException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;

/**
 * Decides claims. A claim is a few short transactions, each stage a class of its own, in the order
 * they run (see "One claim, class by class" in {@code docs/architecture.md}):
 *
 * <ol>
 *   <li>wait if asked: a held claim naps until a notice or its wait hint ({@link #held}), and a
 *       claim woken with others may share their look ({@link #look});
 *   <li>a deploy whose pass this replica read closed is answered "done" from one read ({@link
 *       PassOver});
 *   <li>the first transaction finds the deploy's pass ({@link FirstLook}), or the claim opens it
 *       and looks again ({@link BootPasses}); it serves the caller's epochs in order — the
 *       namespace's open takeovers (oldest first), then its deploy's boot epoch — re-letting a
 *       claimable batch ({@link Relets}), else stepping on the first epoch whose lock is free;
 *   <li>else the epochs' locks in order ({@link EpochLocks}), each a visit of steps ({@link
 *       EpochSteps}): cut the next range of the scan ({@link Cuts}); once it is done, re-let, hand
 *       out deferred runs whose proof is gone ({@link DeferredRechecks}), or close the epoch
 *       ({@link Closing});
 *   <li>a range is classified in a transaction of its own, outside the epoch lock, in parallel with
 *       other claimers' ranges, and becomes the caller's batch ({@link RangeClassification}).
 * </ol>
 *
 * A round that hands nothing out (the deploy's pass was just opened, or a range had nothing to hand
 * out) is followed by another, in new transactions ({@link #decide}): no transaction walks more
 * than one page. If no epoch yields a batch, the caller is told to wait (batches or deferred runs
 * may still come back) or that it is done.
 */
@ApplicationScoped
@Startup
public class ClaimService {

  private final Databases databases;
  private final Gate gate;
  private final RunSources sources;
  private final RollcallConfig config;
  private final RecoveryMetrics metrics;
  private final Wakeups wakeups;
  private final ClosedEpochs closedEpochs;
  private final PassOver passOver;
  private final FirstLook firstLook;
  private final BootPasses boots;
  private final EpochLocks locks;
  private final RangeClassification classification;

  /** The latest look under way of each deploy ({@link #look}), by namespace and deploy. */
  private final ConcurrentHashMap<String, LookUnderWay> looks = new ConcurrentHashMap<>();

  ClaimService(
      Databases databases,
      Gate gate,
      RunSources sources,
      RollcallConfig config,
      RecoveryMetrics metrics,
      Wakeups wakeups,
      ClosedEpochs closedEpochs,
      PassOver passOver,
      FirstLook firstLook,
      BootPasses boots,
      EpochLocks locks,
      RangeClassification classification) {
    this.databases = databases;
    this.gate = gate;
    this.sources = sources;
    this.config = config;
    this.metrics = metrics;
    this.wakeups = wakeups;
    this.closedEpochs = closedEpochs;
    this.passOver = passOver;
    this.firstLook = firstLook;
    this.boots = boots;
    this.locks = locks;
    this.classification = classification;
    if (config.claim().maxScanners() < 0) {
      throw new IllegalArgumentException(
          "rollcall.claim.max-scanners must be 0 (no limit) or more, not "
              + config.claim().maxScanners());
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
  int queuedForLock(String namespace, long epochId) {
    return locks.queued(namespace, epochId);
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

  /**
   * The loop of a claim's look: rounds until one answers. A round that answers nothing (empty) left
   * the database changed for the next: it opened the deploy's pass, or settled a range that had
   * nothing to hand out.
   */
  private Uni<ClaimResult> decide(Caller caller, int maxRuns) {
    return round(caller, maxRuns)
        .chain(
            answer ->
                answer.isPresent() ? Uni.createFrom().item(answer.get()) : decide(caller, maxRuns));
  }

  /** One round: the closed pass's fast way out, else the claim's transactions. */
  private Uni<Optional<ClaimResult>> round(Caller caller, int maxRuns) {
    OptionalLong closedBoot = closedEpochs.bootOf(caller.namespace(), caller.deploymentId());
    if (closedBoot.isEmpty()) {
      return inTransactions(caller, maxRuns);
    }
    return passOver
        .answer(caller, closedBoot.getAsLong())
        .chain(
            done ->
                done.isPresent() ? Uni.createFrom().item(done) : inTransactions(caller, maxRuns));
  }

  /**
   * A round through the claim's transactions: the first look; then the deploy's new pass, or the
   * epochs' locks; then the range's classification.
   */
  private Uni<Optional<ClaimResult>> inTransactions(Caller caller, int maxRuns) {
    ClaimContext claim =
        new ClaimContext(
            caller,
            sources.get(caller.namespace()),
            databases.of(caller.namespace()),
            maxRuns,
            config.batch().lease().toMillis());
    // Each transaction of a claim takes a permit of the gate for as long as it holds a pooled
    // connection, and no longer: a claim waiting for work, or for its turn at an epoch's lock,
    // holds none, so completes and other claims' transactions never queue behind it. Its later
    // transactions (the cut, the classification) go ahead of new claims' first looks.
    return gate.run(() -> claim.pool().withTransaction(conn -> firstLook.look(conn, claim)))
        .chain(
            plan ->
                plan.isEmpty()
                    ? boots.open(claim).map(opened -> Optional.<ClaimResult>empty())
                    : serve(claim, plan.get()));
  }

  /**
   * The rest of a round after its first look: the epochs' locks, then the range's classification.
   */
  private Uni<Optional<ClaimResult>> serve(ClaimContext claim, Plan plan) {
    Uni<Served> look =
        plan.served().isPresent()
            ? Uni.createFrom().item(plan.served().get())
            : locks.serve(claim, plan.walk(), plan.readAhead());
    return look.chain(
        served -> {
          if (served.batch().isPresent()) {
            return Uni.createFrom()
                .item(Optional.<ClaimResult>of(new ClaimResult.Batch(served.batch().get())));
          }
          if (served.range().isEmpty()) {
            return Uni.createFrom()
                .item(Optional.of(answer(served.hint(), plan.walk().bootEpochId())));
          }
          // The epoch lock is released: classify the range in a transaction of its own. Nothing
          // to hand out in that range (or it was lost): empty, and the next round.
          return gate.runAhead(
                  () ->
                      claim
                          .pool()
                          .withTransaction(
                              conn -> classification.classify(conn, claim, served.range().get())))
              .map(batch -> batch.<ClaimResult>map(ClaimResult.Batch::new));
        });
  }

  /** Wait when an epoch gave a hint, else done (naming the deploy's boot epoch, if it has one). */
  private ClaimResult answer(Optional<WaitHints.Hint> wait, OptionalLong bootEpochId) {
    return wait.<ClaimResult>map(
            hint -> {
              long retryAfterMs = waitHint(hint.ms());
              return new ClaimResult.Wait(retryAfterMs, WaitHints.nap(hint, retryAfterMs));
            })
        // The answer's wire form says "no boot epoch" with null.
        .orElse(new ClaimResult.Done(bootEpochId.isPresent() ? bootEpochId.getAsLong() : null));
  }

  private long waitHint(long msUntilNextChange) {
    return WaitHints.hint(
        config.claim().waitMin().toMillis(),
        config.claim().waitMax().toMillis(),
        msUntilNextChange,
        ThreadLocalRandom.current());
  }
}
