package dev.rollcall.api.dto;

import com.fasterxml.jackson.annotation.JsonCreator;
import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonProperty;
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
      List<InFlightEntry> inFlight) {}

  /**
   * One entry of an {@code inFlight} list: a run id (a JSON string), or an object {@code {"runId":
   * "wrun_…", "messageId": "msg_…"}} whose {@code messageId}, the queue message that delivered the
   * execution, is optional.
   */
  public record InFlightEntry(String runId, String messageId) {

    /** The plain form: a run id. */
    @JsonCreator(mode = JsonCreator.Mode.DELEGATING)
    public static InFlightEntry of(String runId) {
      return new InFlightEntry(runId, null);
    }

    /** The object form. */
    @JsonCreator(mode = JsonCreator.Mode.PROPERTIES)
    public static InFlightEntry of(
        @JsonProperty("runId") String runId, @JsonProperty("messageId") String messageId) {
      return new InFlightEntry(runId, messageId);
    }
  }

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
   * present, is the state of the instance's session lock. {@code workerIds}, when present, names
   * queue workers of the instance found since it registered; they are added to those it has.
   */
  public record HeartbeatRequest(
      List<InFlightEntry> inFlight, SessionLockReport sessionLock, List<String> workerIds) {}

  /**
   * The session lock as the client holds it: {@code state} is {@code held} (by backend {@code
   * pid}), {@code unavailable} (it cannot be held: a pooler, a key collision) or {@code lost} (the
   * session ended, reconnecting); {@code reconnected}: the lock was taken again in a new session
   * since the last report.
   */
  public record SessionLockReport(String state, Integer pid, Boolean reconnected) {}

  /** {@code DELETE /instances/{id}}; the body is optional: the last in-flight set. */
  public record LeaveRequest(List<InFlightEntry> inFlight, Boolean exiting) {}

  /**
   * The answer to a heartbeat. {@code recheckAfterMs}, when present, says to heartbeat again after
   * that many milliseconds rather than a full interval later: a peer holding runs is about to be
   * declared dead, and its takeover is then claimable.
   */
  @JsonInclude(JsonInclude.Include.NON_NULL)
  public record HeartbeatResponse(
      OffsetDateTime leaseExpiresAt, boolean recoveryPending, Long recheckAfterMs) {}

  /**
   * {@code POST /recovery/claim}; the body is optional. {@code waitMs} (0 to {@code
   * rollcall.claim.max-wait}): hold a {@code wait} answer that long at most, answering as soon as a
   * batch can be claimed or the pass is done. {@code idle}: the caller's pass is done and it waits
   * for work (takeovers, sweeps): a {@code done} answer is held too.
   */
  public record ClaimRequest(Integer maxRuns, Integer waitMs, Boolean idle) {}

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

  /**
   * A run to enqueue; {@code deadInstanceId} is set for runs taken over from a dead instance, and
   * {@code messageId} when the run must be re-driven with exactly that queue message id (an
   * interrupted step's owner message: the engine re-runs the step only for it).
   */
  @JsonInclude(JsonInclude.Include.NON_NULL)
  public record RunView(
      String runId,
      String workflowName,
      String queueName,
      Reason reason,
      UUID deadInstanceId,
      String messageId) {}

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
