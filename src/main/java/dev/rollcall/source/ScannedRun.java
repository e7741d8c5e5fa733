package dev.rollcall.source;

/**
 * What a scan reads of one run: its id, workflow name and status, never its payload.
 *
 * @param recentlyActive the engine touched the run within the activity fence, by the database's
 *     clock (always false for a source without an activity column)
 */
public record ScannedRun(
    String runId, String workflowName, String status, boolean recentlyActive) {}
