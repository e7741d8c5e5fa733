package dev.rollcall.source;

/** What a scan reads of one run: its id, workflow name and status, never its payload. */
public record ScannedRun(String runId, String workflowName, String status) {}
