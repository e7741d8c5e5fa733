package dev.rollcall.recovery;

/** A run in a batch: what the claimer needs to enqueue it exactly as the engine would. */
public record HandedOutRun(String runId, String workflowName, String queueName, Reason reason) {}
