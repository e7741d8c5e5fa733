package dev.rollcall.recovery;

import dev.rollcall.config.RollcallConfig;
import dev.rollcall.error.DomainException;
import dev.rollcall.error.Problems.SourceUnavailable;
import dev.rollcall.registry.Caller;
import dev.rollcall.registry.InstanceService;
import dev.rollcall.source.RunSource;
import dev.rollcall.source.RunSources;
import dev.rollcall.source.ScannedRun;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Pool;
import io.vertx.mutiny.sqlclient.SqlClient;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Decides claims. One claim is one transaction that, for each epoch the caller may serve:
 *
 * <ol>
 *   <li>re-leases a claimable batch (a retry batch, or one whose lease expired), skipping batches
 *       other claimers are taking at this moment; else
 *   <li>takes the epoch lock and cuts the next page of the scan into a new batch; else
 *   <li>with the scan finished, closes the epoch if no batch is outstanding, or moves on.
 * </ol>
 *
 * If no epoch yields a batch, the caller is told to wait (others hold batches that may still come
 * back) or that it is done.
 */
@ApplicationScoped
public class ClaimService {

  private final Pool pool;
  private final RunSources sources;
  private final Epochs epochs;
  private final Batches batches;
  private final RollcallConfig config;

  ClaimService(
      Pool pool, RunSources sources, Epochs epochs, Batches batches, RollcallConfig config) {
    this.pool = pool;
    this.sources = sources;
    this.epochs = epochs;
    this.batches = batches;
    this.config = config;
  }

  /** Claims up to {@code maxRuns} runs for the caller. */
  public Uni<ClaimResult> claim(Caller caller, int maxRuns) {
    RunSource source = sources.get(caller.namespace());
    return pool.withTransaction(
        conn ->
            InstanceService.requireLive(conn, caller.instanceId())
                .chain(() -> bootEpoch(conn, source, caller))
                .chain(
                    boot ->
                        serve(conn, source, caller, boot, maxRuns)
                            .map(
                                batch ->
                                    batch.<ClaimResult>map(ClaimResult.Batch::new).orElse(null))
                            .chain(
                                result ->
                                    result != null
                                        ? Uni.createFrom().item(result)
                                        : waitOrDone(conn, boot))));
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
                      created -> epochs.findBoot(conn, caller.namespace(), caller.deploymentId()))
                  .map(Optional::orElseThrow);
            });
  }

  /** A batch from this epoch for the caller, if there is one. */
  private Uni<Optional<LeasedBatch>> serve(
      SqlClient conn, RunSource source, Caller caller, Epoch epoch, int maxRuns) {
    if (!epoch.open()) {
      return Uni.createFrom().item(Optional.empty());
    }
    return relet(conn, source, caller, epoch)
        .chain(
            batch ->
                batch.isPresent()
                    ? Uni.createFrom().item(batch)
                    : epochs
                        .lock(conn, epoch.id())
                        .chain(locked -> cutOrRelet(conn, source, caller, locked, maxRuns)));
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

  /** Under the epoch lock: cut pages until one yields runs to hand out, or the scan ends. */
  private Uni<Optional<LeasedBatch>> cutOrRelet(
      SqlClient conn, RunSource source, Caller caller, Epoch epoch, int maxRuns) {
    if (!epoch.open()) {
      return Uni.createFrom().item(Optional.empty());
    }
    if (epoch.scanDone()) {
      // A lease may have expired since the first look; the lock does not cover batches, so look
      // again before telling the caller to wait.
      return relet(conn, source, caller, epoch);
    }
    return unavailableIfFails(source, source.page(conn, epoch.snapshot(), epoch.cursor(), maxRuns))
        .chain(
            page -> {
              boolean last = page.size() < maxRuns;
              Optional<String> cursor =
                  page.isEmpty()
                      ? Optional.empty()
                      : Optional.of(page.get(page.size() - 1).runId());
              List<HandedOutRun> runs = handOut(source, page);
              Uni<Void> advanced = epochs.advance(conn, epoch.id(), cursor, last, page.size());
              if (!runs.isEmpty()) {
                return advanced
                    .chain(() -> batches.cut(conn, epoch, runs, caller.instanceId(), leaseMs()))
                    .map(Optional::of);
              }
              Epoch next =
                  new Epoch(
                      epoch.id(),
                      epoch.namespace(),
                      epoch.kind(),
                      epoch.open(),
                      epoch.snapshot(),
                      cursor.or(epoch::cursor),
                      last);
              return advanced.chain(() -> cutOrRelet(conn, source, caller, next, maxRuns));
            });
  }

  /**
   * The verdict of every scanned run. The table source does not classify runs, so every active run
   * is re-driven (fail open): {@code pending} when it has not started, else {@code unclassified}.
   */
  private static List<HandedOutRun> handOut(RunSource source, List<ScannedRun> page) {
    List<HandedOutRun> runs = new ArrayList<>(page.size());
    for (ScannedRun run : page) {
      Reason reason = source.isPending(run) ? Reason.PENDING : Reason.UNCLASSIFIED;
      runs.add(
          new HandedOutRun(
              run.runId(), run.workflowName(), source.queueName(run.workflowName()), reason));
    }
    return runs;
  }

  /**
   * Nothing to hand out: close the epoch if every batch is finished (under the epoch lock), else
   * tell the caller when to look again — never later than the first outstanding lease expiry.
   */
  private Uni<ClaimResult> waitOrDone(SqlClient conn, Epoch boot) {
    if (!boot.open()) {
      return Uni.createFrom().item(new ClaimResult.Done(boot.id()));
    }
    return epochs
        .lock(conn, boot.id())
        .chain(
            locked ->
                !locked.open()
                    ? Uni.createFrom().item(Boolean.TRUE)
                    : epochs.closeIfFinished(conn, boot.id()))
        .chain(
            closed -> {
              if (closed) {
                return Uni.createFrom().item(new ClaimResult.Done(boot.id()));
              }
              return batches
                  .outstanding(conn, boot.id())
                  .map(
                      out -> {
                        if (out.leased() == 0) {
                          // Scan not finished yet is impossible here (serve cut pages until it
                          // was); this is a retry batch another claimer is taking right now.
                          return new ClaimResult.Wait(config.claim().waitMin().toMillis());
                        }
                        return new ClaimResult.Wait(waitHint(out.msUntilFirstExpiry()));
                      });
            });
  }

  /** A failure to read the source is the source's problem (503), not an internal error. */
  private static <T> Uni<T> unavailableIfFails(RunSource source, Uni<T> read) {
    return read.onFailure(e -> !(e instanceof DomainException))
        .transform(e -> new SourceUnavailable(source.namespace(), e.getMessage()));
  }

  private long waitHint(long msUntilFirstExpiry) {
    long min = config.claim().waitMin().toMillis();
    long max = Math.max(min, config.claim().waitMax().toMillis());
    // Jitter spreads waiting claimers out; an expiring lease brings the next look forward.
    long jittered = ThreadLocalRandom.current().nextLong(min, max + 1);
    return Math.max(min, Math.min(jittered, msUntilFirstExpiry));
  }

  private long leaseMs() {
    return config.batch().lease().toMillis();
  }
}
