package dev.rollcall.recovery;

import java.util.UUID;

/**
 * What an epoch does with one run, and why.
 *
 * @param deadInstanceId for a takeover, the instance the run was taken from
 * @param messageId for a hand-out, the queue message id to re-drive it with (an interrupted step's
 *     owner message); null for a fresh one
 */
public record Verdict(
    String runId,
    String workflowName,
    Reason reason,
    Disposition disposition,
    UUID deadInstanceId,
    String messageId) {

  /** Hand the run out, wait and look again before the epoch closes, or leave it alone. */
  public enum Disposition {
    HAND_OUT,
    DEFER,
    SKIP
  }

  static Verdict handOut(String runId, String name, Reason reason, UUID deadInstanceId) {
    return new Verdict(runId, name, reason, Disposition.HAND_OUT, deadInstanceId, null);
  }

  /** The same hand-out, re-driven with exactly this queue message id. */
  Verdict withMessageId(String id) {
    return new Verdict(runId, workflowName, reason, disposition, deadInstanceId, id);
  }

  static Verdict defer(String runId, String name, Reason reason) {
    return new Verdict(runId, name, reason, Disposition.DEFER, null, null);
  }

  static Verdict skip(String runId, String name, Reason reason) {
    return new Verdict(runId, name, reason, Disposition.SKIP, null, null);
  }
}
