package dev.rollcall.queue;

import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.SqlClient;
import java.util.List;

/**
 * An engine's job queue, as far as Rollcall touches it: releasing the locks that dead workers still
 * hold, so the queue redelivers their jobs at once. Rollcall never deletes, replaces or re-times a
 * job.
 */
public interface QueueLocks {

  /** A job lock that was released. {@code runId} is null when the payload does not name one. */
  record ReleasedLock(long jobId, String taskIdentifier, String workerId, String runId) {}

  /** Releases the locks these workers hold on this namespace's jobs, returning what it released. */
  Uni<List<ReleasedLock>> releaseLocksOf(SqlClient client, List<String> workerIds);
}
