package dev.rollcall.source;

import java.time.OffsetDateTime;

/**
 * The bound of one epoch's scan, fixed when the epoch is created: the largest run id then, and the
 * database time then. Runs created later are not part of the epoch.
 *
 * @param maxRunId the largest run id at creation, or null when the source was empty
 * @param takenAt the database's {@code now()} at creation
 */
public record Snapshot(String maxRunId, OffsetDateTime takenAt) {}
