package dev.rollcall.admin;

import com.fasterxml.jackson.annotation.JsonInclude;
import java.time.OffsetDateTime;
import java.util.List;
import java.util.Map;
import java.util.UUID;

/** What the admin API shows. */
public final class AdminViews {

  private AdminViews() {}

  /** The last hour of recovery, minute by minute, oldest first ({@code namespace} null: all). */
  public record TimelineView(String namespace, List<Minute> minutes) {}

  /**
   * One minute: runs handed out, instances declared dead, the longest detection of a death (from
   * its lease's expiry to its takeover; null when none was detected), and the passes open.
   */
  public record Minute(
      OffsetDateTime at, long handedOut, long deaths, Long detectionMs, long openPasses) {}

  /** A page of a list, with the cursor of the next page (null on the last). */
  public record Page<T>(List<T> items, String nextCursor) {}

  /** A namespace and how its recovery stands. */
  public record NamespaceView(
      String name,
      String sourceKind,
      String source,
      boolean bootRecovery,
      Map<String, Long> instances,
      long openEpochs,
      BootEpochRef lastBootEpoch) {}

  /** The latest boot epoch of a namespace. */
  public record BootEpochRef(
      long id,
      String deploymentId,
      String state,
      OffsetDateTime createdAt,
      OffsetDateTime closedAt) {}

  /**
   * An instance. {@code workerIds}: the queue workers it registered, then those learned from the
   * queue (the workers holding the jobs of the messages it reported).
   */
  public record InstanceView(
      UUID id,
      String namespace,
      String deploymentId,
      String name,
      String state,
      OffsetDateTime registeredAt,
      OffsetDateTime lastHeartbeatAt,
      OffsetDateTime leaseExpiresAt,
      OffsetDateTime endedAt,
      String endReason,
      long inFlight,
      List<String> workerIds) {}

  /** An epoch and its progress. */
  @JsonInclude(JsonInclude.Include.ALWAYS)
  public record EpochView(
      long id,
      String namespace,
      String kind,
      String state,
      String closeReason,
      String deploymentId,
      UUID subjectInstanceId,
      OffsetDateTime createdAt,
      OffsetDateTime closedAt,
      long durationMs,
      boolean scanDone,
      long runsScanned,
      RunCounts runs,
      Map<String, Long> handedOutByReason,
      Map<String, Long> skippedByReason,
      BatchCounts batches,
      List<Claimer> claimers) {}

  /** Runs of an epoch by what became of them (distinct runs). */
  public record RunCounts(
      long handedOut,
      long enqueued,
      long failed,
      long deferred,
      long skipped,
      long pendingRecheck) {}

  /** Batches of an epoch by state; {@code expired} counts leases that ran out. */
  public record BatchCounts(
      long total, long ready, long leased, long completed, long abandoned, long expired) {}

  /** An instance that claimed work of an epoch. */
  public record Claimer(UUID instanceId, long batches, long runs) {}

  /** A batch. */
  public record BatchView(
      long id,
      String state,
      int fence,
      int attempts,
      UUID claimerId,
      OffsetDateTime leaseExpiresAt,
      int runCount,
      OffsetDateTime createdAt,
      OffsetDateTime completedAt,
      Long retryOf) {}

  /** The ledger of one run. */
  public record RunLedger(String runId, String namespace, Owner owner, List<LedgerEntry> ledger) {}

  /** Who runs a run right now. */
  public record Owner(UUID instanceId, OffsetDateTime since) {}

  /**
   * One ledger row. {@code epochId} and {@code epochKind} are null for a row recorded outside any
   * epoch (a queue lock released as an orphan). {@code id} is null for a hand-out in flight
   * (outcome {@code leased}): its row is written with its outcome.
   */
  public record LedgerEntry(
      Long id,
      Long epochId,
      String epochKind,
      Long batchId,
      Integer fence,
      UUID instanceId,
      String reason,
      String outcome,
      String detail,
      OffsetDateTime recordedAt,
      OffsetDateTime resolvedAt) {}

  /** {@code POST /admin/epochs}. */
  public record StartEpoch(String namespace, String kind) {}

  /** {@code PUT /admin/namespaces/{ns}/recovery}. */
  public record RecoverySwitch(Boolean bootRecovery) {}

  /** The answer to an eviction. */
  public record Evicted(UUID instanceId, String state, Long takeoverEpochId) {}
}
