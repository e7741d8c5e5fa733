package dev.rollcall.api.dto;

import com.fasterxml.jackson.annotation.JsonInclude;
import dev.rollcall.recovery.EpochKind;
import dev.rollcall.recovery.Reason;
import java.time.OffsetDateTime;
import java.util.List;
import java.util.UUID;

/** The JSON bodies of the instance and recovery API. */
public final class Dtos {

  private Dtos() {}

  /** {@code POST /instances}. */
  public record RegisterRequest(
      String namespace,
      String deploymentId,
      String name,
      List<String> workerIds,
      List<String> inFlight) {}

  /**
   * The answer to a registration; the token is shown only here. {@code sessionLock}: the keys of
   * the session advisory lock the instance should hold while registered.
   */
  public record RegisterResponse(
      UUID instanceId,
      String token,
      OffsetDateTime leaseExpiresAt,
      long leaseTtlMs,
      long heartbeatIntervalMs,
      SessionLockKeys sessionLock) {}

  /** {@code pg_try_advisory_lock(classId, objId)}, the two-int4 form. */
  public record SessionLockKeys(int classId, int objId) {}

  /**
   * {@code POST /instances/{id}/heartbeat}; the body is optional. {@code inFlight}, when present,
   * replaces the instance's in-flight set; absent leaves it as it was. {@code sessionLock}, when
   * present, is the state of the instance's session lock.
   */
  public record HeartbeatRequest(List<String> inFlight, SessionLockReport sessionLock) {}

  /**
   * The session lock as the client holds it: {@code state} is {@code held} (by backend {@code
   * pid}), {@code unavailable} (it cannot be held: a pooler, a key collision) or {@code lost} (the
   * session ended, reconnecting); {@code reconnected}: the lock was taken again in a new session
   * since the last report.
   */
  public record SessionLockReport(String state, Integer pid, Boolean reconnected) {}

  /** {@code DELETE /instances/{id}}; the body is optional: the last in-flight set. */
  public record LeaveRequest(List<String> inFlight) {}

  /**
   * The answer to a heartbeat. {@code recheckAfterMs}, when present, says to heartbeat again after
   * that many milliseconds rather than a full interval later: a peer holding runs is about to be
   * declared dead, and its takeover is then claimable.
   */
  @JsonInclude(JsonInclude.Include.NON_NULL)
  public record HeartbeatResponse(
      OffsetDateTime leaseExpiresAt, boolean recoveryPending, Long recheckAfterMs) {}

  /** {@code POST /recovery/claim}; the body is optional. */
  public record ClaimRequest(Integer maxRuns) {}

  /** The answer to a claim: exactly one of batch, retryAfterMs, epochId is set. */
  @JsonInclude(JsonInclude.Include.NON_NULL)
  public record ClaimResponse(String status, BatchView batch, Long retryAfterMs, Long epochId) {}

  /** A leased batch. */
  public record BatchView(
      long id,
      long epochId,
      EpochKind epochKind,
      int fence,
      OffsetDateTime leaseExpiresAt,
      List<RunView> runs) {}

  /** A run to enqueue; {@code deadInstanceId} is set for runs taken over from a dead instance. */
  @JsonInclude(JsonInclude.Include.NON_NULL)
  public record RunView(
      String runId, String workflowName, String queueName, Reason reason, UUID deadInstanceId) {}

  /** {@code POST /recovery/batches/{id}/complete}. */
  public record CompleteRequest(Integer fence, List<String> failedRunIds) {}

  /** The answer to a complete. */
  public record CompleteResponse(
      long batchId,
      String state,
      int enqueued,
      int failed,
      int retried,
      boolean alreadyCompleted) {}
}
