package dev.rollcall.recovery;

import dev.rollcall.config.RollcallConfig;
import dev.rollcall.error.DomainException;
import dev.rollcall.error.Problems.SourceUnavailable;
import dev.rollcall.metrics.RecoveryMetrics;
import dev.rollcall.recovery.Verdict.Disposition;
import dev.rollcall.registry.Caller;
import dev.rollcall.registry.InstanceService;
import dev.rollcall.source.RunSource;
import dev.rollcall.source.RunSources;
import dev.rollcall.source.ScannedRun;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Pool;
import io.vertx.mutiny.sqlclient.SqlClient;
import io.vertx.mutiny.sqlclient.Tuple;
import jakarta.enterprise.context.ApplicationScoped;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ThreadLocalRandom;
import java.util.stream.Collectors;

/**
 * Decides claims. One claim is one transaction that serves the caller's epochs in order — the
 * namespace's open takeovers (oldest first), then its deploy's boot epoch — and for each:
 *
 * <ol>
 *   <li>re-leases a claimable batch (a ready batch, or one whose lease expired), skipping batches
 *       other claimers are taking at this moment; else
 *   <li>takes the epoch lock and cuts the next page of the scan into a batch (runs a live instance
 *       owns, or that were recently active, are deferred); else
 *   <li>with the scan finished, re-checks deferred runs that are due and hands out those whose
 *       proof is gone; else
 *   <li>closes the epoch if nothing is outstanding, or moves on.
 * </ol>
 *
 * If no epoch yields a batch, the caller is told to wait (batches or deferred runs may still come
 * back) or that it is done.
 */
@ApplicationScoped
public class ClaimService {

  private final Pool pool;
  private final RunSources sources;
  private final Epochs epochs;
  private final Batches batches;
  private final Deferrals deferrals;
  private final Classifier classifier;
  private final Ledger ledger;
  private final RollcallConfig config;
  private final RecoveryMetrics metrics;

  ClaimService(
      Pool pool,
      RunSources sources,
      Epochs epochs,
      Batches batches,
      Deferrals deferrals,
      Classifier classifier,
      Ledger ledger,
      RollcallConfig config,
      RecoveryMetrics metrics) {
    this.pool = pool;
    this.sources = sources;
    this.epochs = epochs;
    this.batches = batches;
    this.deferrals = deferrals;
    this.classifier = classifier;
    this.ledger = ledger;
    this.config = config;
    this.metrics = metrics;
  }

  /** The result of serving one epoch: a batch, or nothing now (with a wait hint if it may come). */
  private record Served(Optional<LeasedBatch> batch, Optional<Long> waitMs) {
    static Served batch(LeasedBatch batch) {
      return new Served(Optional.of(batch), Optional.empty());
    }

    static Served nothing() {
      return new Served(Optional.empty(), Optional.empty());
    }

    static Served later(long waitMs) {
      return new Served(Optional.empty(), Optional.of(waitMs));
    }
  }

  /** Claims up to {@code maxRuns} runs for the caller. */
  public Uni<ClaimResult> claim(Caller caller, int maxRuns) {
    long started = System.nanoTime();
    return decide(caller, maxRuns)
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

  private Uni<ClaimResult> decide(Caller caller, int maxRuns) {
    RunSource source = sources.get(caller.namespace());
    return pool.withTransaction(
        conn ->
            InstanceService.requireLive(conn, caller.instanceId())
                .chain(() -> bootRecoveryOn(conn, caller.namespace()))
                .chain(
                    on ->
                        on
                            ? bootEpoch(conn, source, caller).map(Optional::of)
                            // Switched off by an operator: the deploy's pass is not served
                            // (nor created); shared work (takeovers, sweeps) still is.
                            : epochs
                                .findBoot(conn, caller.namespace(), caller.deploymentId())
                                .map(found -> found.map(Epoch::closedView)))
                .chain(
                    boot ->
                        epochs
                            .openShared(conn, caller.namespace())
                            .chain(
                                shared -> {
                                  List<Epoch> order = new ArrayList<>(shared);
                                  boot.ifPresent(order::add);
                                  return serveInOrder(
                                      conn,
                                      source,
                                      caller,
                                      order,
                                      0,
                                      maxRuns,
                                      Optional.empty(),
                                      boot.map(Epoch::id).orElse(null));
                                })));
  }

  private Uni<Boolean> bootRecoveryOn(SqlClient conn, String namespace) {
    return conn.preparedQuery(
            "SELECT boot_recovery FROM rollcall.namespace_settings WHERE namespace = $1")
        .execute(Tuple.of(namespace))
        .map(rows -> rows.size() == 0 || rows.iterator().next().getBoolean("boot_recovery"));
  }

  private Uni<ClaimResult> serveInOrder(
      SqlClient conn,
      RunSource source,
      Caller caller,
      List<Epoch> order,
      int index,
      int maxRuns,
      Optional<Long> waitMs,
      Long bootEpochId) {
    if (index == order.size()) {
      return Uni.createFrom()
          .item(
              waitMs
                  .<ClaimResult>map(ms -> new ClaimResult.Wait(waitHint(ms)))
                  .orElse(new ClaimResult.Done(bootEpochId)));
    }
    return serve(conn, source, caller, order.get(index), maxRuns)
        .chain(
            served -> {
              if (served.batch().isPresent()) {
                return Uni.createFrom().item(new ClaimResult.Batch(served.batch().get()));
              }
              Optional<Long> wait =
                  served.waitMs().isEmpty()
                      ? waitMs
                      : Optional.of(Math.min(served.waitMs().get(), waitMs.orElse(Long.MAX_VALUE)));
              return serveInOrder(
                  conn, source, caller, order, index + 1, maxRuns, wait, bootEpochId);
            });
  }

  /** The deploy's boot epoch, created on the first claim of the deploy. */
  private Uni<Epoch> bootEpoch(SqlClient conn, RunSource source, Caller caller) {
    return epochs
        .findBoot(conn, caller.namespace(), caller.deploymentId())
        .chain(
            found -> {
              if (found.isPresent()) {
                return Uni.createFrom().item(found.get());
              }
              // Only the first claim of a deploy reads the snapshot bound; later ones find the row.
              return unavailableIfFails(source, source.snapshot(conn))
                  .chain(
                      snapshot ->
                          epochs.createBoot(
                              conn,
                              caller.namespace(),
                              caller.deploymentId(),
                              snapshot,
                              caller.instanceId()))
                  .chain(
                      created ->
                          epochs
                              .findBoot(conn, caller.namespace(), caller.deploymentId())
                              .map(Optional::orElseThrow)
                              .call(
                                  boot ->
                                      created
                                          ? source.prepareEpoch(conn, boot.id())
                                          : Uni.createFrom().voidItem()));
            });
  }

  private Uni<Served> serve(
      SqlClient conn, RunSource source, Caller caller, Epoch epoch, int maxRuns) {
    if (!epoch.open()) {
      return Uni.createFrom().item(Served.nothing());
    }
    return relet(conn, source, caller, epoch)
        .chain(
            batch ->
                batch.isPresent()
                    ? Uni.createFrom().item(Served.batch(batch.get()))
                    : epochs
                        .lock(conn, epoch.id())
                        .chain(locked -> underLock(conn, source, caller, locked, maxRuns)));
  }

  /** Re-leases the oldest claimable batch, giving up batches that were handed out too often. */
  private Uni<Optional<LeasedBatch>> relet(
      SqlClient conn, RunSource source, Caller caller, Epoch epoch) {
    return batches
        .nextClaimable(conn, epoch.id())
        .chain(
            candidate -> {
              if (candidate.isEmpty()) {
                return Uni.createFrom().item(Optional.<LeasedBatch>empty());
              }
              Batches.Claimable batch = candidate.get();
              if (batch.attempts() >= config.batch().maxAttempts()) {
                return batches.abandon(conn, batch).chain(() -> relet(conn, source, caller, epoch));
              }
              return batches
                  .relet(conn, source, epoch, batch, caller.instanceId(), leaseMs())
                  .map(Optional::of);
            });
  }

  /** Holding the epoch lock: cut pages, else re-check deferred runs, else close or wait. */
  private Uni<Served> underLock(
      SqlClient conn, RunSource source, Caller caller, Epoch epoch, int maxRuns) {
    if (!epoch.open()) {
      return Uni.createFrom().item(Served.nothing());
    }
    if (!epoch.scanDone()) {
      int allowed = rateLimited(epoch, maxRuns);
      return allowed > 0
          ? cutPage(conn, source, caller, epoch, allowed)
          // A sweep ahead of its rate: the claimer comes back when a heartbeat says so.
          : Uni.createFrom().item(Served.nothing());
    }
    // A lease may have expired since the first look; the epoch lock does not cover batches.
    return relet(conn, source, caller, epoch)
        .chain(
            batch ->
                batch.isPresent()
                    ? Uni.createFrom().item(Served.batch(batch.get()))
                    : recheckDeferred(conn, source, caller, epoch, maxRuns));
  }

  /** Cuts the next page; a page that hands nothing out (all deferred) moves on to the next. */
  private Uni<Served> cutPage(
      SqlClient conn, RunSource source, Caller caller, Epoch epoch, int maxRuns) {
    Uni<List<ScannedRun>> read =
        source.page(
            conn, epoch.snapshot(), epoch.cursor(), maxRuns, config.effectiveActivityFence());
    return unavailableIfFails(source, read)
        .chain(
            page -> {
              boolean last = page.size() < maxRuns;
              Optional<String> cursor =
                  page.isEmpty() ? epoch.cursor() : Optional.of(page.get(page.size() - 1).runId());
              Epoch advanced = epoch.advancedTo(cursor, last, page.size());
              return classifier
                  .firstLook(conn, source, epoch, page)
                  .chain(
                      verdicts ->
                          epochs
                              .advance(conn, epoch.id(), cursor, last, page.size())
                              .chain(
                                  () -> apply(conn, source, caller, advanced, verdicts, maxRuns)));
            });
  }

  /** Writes a page's verdicts: deferrals and skips to the ledger, hand-outs into a batch. */
  private Uni<Served> apply(
      SqlClient conn,
      RunSource source,
      Caller caller,
      Epoch epoch,
      List<Verdict> verdicts,
      int maxRuns) {
    count(epoch.namespace(), "deferred", of(verdicts, Disposition.DEFER));
    count(epoch.namespace(), "skipped", of(verdicts, Disposition.SKIP));
    return deferrals
        .defer(conn, epoch, of(verdicts, Disposition.DEFER))
        .chain(() -> ledger.record(conn, epoch, of(verdicts, Disposition.SKIP), "skipped", null))
        .chain(
            () ->
                handOut(conn, source, caller, epoch, of(verdicts, Disposition.HAND_OUT), maxRuns));
  }

  private void count(String namespace, String verdict, List<Verdict> verdicts) {
    verdicts.stream()
        .collect(Collectors.groupingBy(v -> v.reason().wire(), Collectors.counting()))
        .forEach((reason, n) -> metrics.runs(namespace, verdict, reason, n));
  }

  /**
   * Leases the runs to the caller as a new batch, or carries on under the lock if there are none.
   */
  private Uni<Served> handOut(
      SqlClient conn,
      RunSource source,
      Caller caller,
      Epoch epoch,
      List<Verdict> runs,
      int maxRuns) {
    if (runs.isEmpty()) {
      return underLock(conn, source, caller, epoch, maxRuns);
    }
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
    return batches.cut(conn, epoch, handed, caller.instanceId(), leaseMs()).map(Served::batch);
  }

  /**
   * The scan is finished: deferred runs whose re-check is due are skipped for good (still owned,
   * still active, finished) or handed out; when none is due, close the epoch or report when to look
   * again.
   */
  private Uni<Served> recheckDeferred(
      SqlClient conn, RunSource source, Caller caller, Epoch epoch, int maxRuns) {
    long fenceMs = config.effectiveActivityFence().toMillis();
    return deferrals
        .due(conn, epoch.id(), fenceMs, maxRuns)
        .chain(
            due -> {
              if (due.isEmpty()) {
                return closeOrWait(conn, epoch);
              }
              return unavailableIfFails(source, classifier.recheck(conn, source, epoch, due))
                  .chain(
                      verdicts ->
                          deferrals
                              .resolve(conn, epoch.id(), due)
                              .chain(() -> apply(conn, source, caller, epoch, verdicts, maxRuns)));
            });
  }

  /**
   * Closes the epoch if nothing is outstanding. Otherwise a boot epoch tells its claimer when to
   * look again (its deploy is not recovered until the epoch closes); for a takeover that others
   * hold, the claimer is done for now: heartbeats say when claimable work appears.
   */
  private Uni<Served> closeOrWait(SqlClient conn, Epoch epoch) {
    return epochs
        .closeIfFinished(conn, epoch.id())
        .chain(
            closed -> {
              if (closed || epoch.kind() != EpochKind.BOOT) {
                return Uni.createFrom().item(Served.nothing());
              }
              return batches
                  .outstanding(conn, epoch.id(), config.effectiveActivityFence().toMillis())
                  .map(
                      out ->
                          out.any()
                              ? Served.later(out.msUntilNextChange())
                              // A ready batch another claimer is taking right now.
                              : Served.later(config.claim().waitMin().toMillis()));
            });
  }

  /**
   * How many runs this claim may scan: a sweep may read at most {@code max-runs-per-second} times
   * its age (by the database's clock), so it never floods the engine's queue.
   */
  private int rateLimited(Epoch epoch, int maxRuns) {
    if (epoch.kind() != EpochKind.SWEEP) {
      return maxRuns;
    }
    long budget = config.sweep().maxRunsPerSecond() * Math.max(1, epoch.ageMs()) / 1000;
    int allowed = (int) Math.max(0, Math.min(maxRuns, budget - epoch.runsScanned()));
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

  /**
   * Jitter spreads waiting claimers out; something that may change sooner (a lease expiring, a
   * deferred run falling due) brings the next look forward.
   */
  private long waitHint(long msUntilNextChange) {
    long min = config.claim().waitMin().toMillis();
    long max = Math.max(min, config.claim().waitMax().toMillis());
    long jittered = ThreadLocalRandom.current().nextLong(min, max + 1);
    return Math.max(min, Math.min(jittered, msUntilNextChange));
  }

  private long leaseMs() {
    return config.batch().lease().toMillis();
  }
}
