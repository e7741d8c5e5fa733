package dev.rollcall.recovery;

import dev.rollcall.config.RollcallConfig;
import dev.rollcall.metrics.RecoveryMetrics;
import dev.rollcall.source.ScannedRun;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.SqlClient;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.List;
import java.util.Optional;

/**
 * A claim's stage on an epoch being scanned, holding its lock: cut the next page of the scan into a
 * scanning range leased to the caller, if the scan has room for it ({@code
 * rollcall.claim.max-scanners}) and a sweep is not ahead of its rate. The lock covers reading the
 * page's ids and this one row only; the range is classified after it is released.
 */
@ApplicationScoped
class Cuts {

  private final Epochs epochs;
  private final Batches batches;
  private final RollcallConfig config;
  private final RecoveryMetrics metrics;

  Cuts(Epochs epochs, Batches batches, RollcallConfig config, RecoveryMetrics metrics) {
    this.epochs = epochs;
    this.batches = batches;
    this.config = config;
    this.metrics = metrics;
  }

  /** Holding the lock of an epoch being scanned: the caller's range of its next page, if any. */
  Uni<Step> next(SqlClient conn, ClaimContext claim, Epoch epoch) {
    int allowed = rateLimited(epoch, claim.maxRuns());
    if (allowed <= 0) {
      // A sweep ahead of its rate: the claimer comes back when a heartbeat says so.
      return Uni.createFrom().item(Step.done(Served.nothing()));
    }
    return batches
        .scanners(conn, epoch.id(), claim.instanceId())
        .chain(
            scanners ->
                scanners.admit(scannerLimit())
                    ? cutRange(conn, claim, epoch, allowed)
                    : Uni.createFrom().item(Step.done(full(epoch, claim, scanners))));
  }

  /**
   * Holding the epoch lock: reads the next page's runs and leases them to the caller as a scanning
   * range, and moves the cursor past them. An empty page finishes the scan: the next step is on the
   * finished epoch.
   */
  private Uni<Step> cutRange(SqlClient conn, ClaimContext claim, Epoch epoch, int maxRuns) {
    Uni<List<ScannedRun>> read =
        claim
            .source()
            .page(conn, epoch.snapshot(), epoch.cursor(), maxRuns, config.effectiveActivityFence());
    return claim.fromSource(read).chain(page -> cutPage(conn, claim, epoch, page, maxRuns));
  }

  /**
   * Holding the epoch lock: moves the cursor past a page read after it, and leases the page's runs
   * to the caller as a scanning range. The two statements are pipelined (one round trip).
   */
  Uni<Step> cutPage(
      SqlClient conn, ClaimContext claim, Epoch epoch, List<ScannedRun> page, int maxRuns) {
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
        .unis(moved.replaceWith(true), batches.cutRange(conn, advanced, ids, claim.lease()))
        .asTuple()
        .map(
            t ->
                Step.done(
                    Served.range(
                        new Served.ToClassify(advanced, t.getItem2(), Optional.of(page)))));
  }

  /**
   * What a claim gets from a scan that {@code rollcall.claim.max-scanners} other instances work: on
   * a boot epoch, a wait until one of them leaves the scan (the notice of its last lease ending
   * wakes the claim; failing that, it looks again when their first lease could expire); on a sweep,
   * nothing for now, as when a sweep is ahead of its rate.
   */
  Served full(Epoch epoch, ClaimContext claim, Scanners scanners) {
    metrics.scanFull(claim.namespace());
    return epoch.kind() == EpochKind.BOOT
        ? Served.later(WaitHints.Hint.announcedBy(scanners.msUntilFirstExpiry()))
        : Served.nothing();
  }

  /** How many instances may work one scan at once; 0 for no limit. */
  int scannerLimit() {
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
}
