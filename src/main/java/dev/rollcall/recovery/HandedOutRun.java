package dev.rollcall.recovery;

import java.util.UUID;

/**
 * A run in a batch: what the claimer needs to enqueue it exactly as the engine would.
 *
 * @param deadInstanceId for a takeover, the dead instance the run was taken from; else null
 * @param messageId the queue message id to re-drive the run with; null for a fresh one
 */
public record HandedOutRun(
    String runId,
    String workflowName,
    String queueName,
    Reason reason,
    UUID deadInstanceId,
    String messageId) {}
