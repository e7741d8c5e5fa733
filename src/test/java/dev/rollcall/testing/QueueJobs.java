package dev.rollcall.testing;

import java.util.ArrayList;
import java.util.List;

/**
 * Jobs a test adds to the engine's queue (graphile-worker) as the engine adds them, then deletes.
 */
public final class QueueJobs {

  private final List<Long> ids = new ArrayList<>();

  /** The jobs added so far; a test may add the ids of jobs it added another way. */
  public List<Long> ids() {
    return ids;
  }

  /**
   * A job as the engine adds it: the payload carries the message id and the run; {@code key} is the
   * job key (the message id, or an idempotency key, or null). Locked {@code lockedAgoMs} ago by
   * {@code worker} unless that is null.
   */
  public long add(
      String task, String key, String messageId, String runId, String worker, long lockedAgoMs) {
    String payload = EngineRuns.flowsPayload(messageId, "wf", runId, 1);
    long id =
        key == null
            ? Db.number("SELECT id FROM graphile_worker.add_job(?, ?::json)", task, payload)
            : Db.number(
                "SELECT id FROM graphile_worker.add_job(?, ?::json, job_key => ?)",
                task,
                payload,
                key);
    if (worker != null) {
      Db.update(
          "UPDATE graphile_worker._private_jobs SET locked_by = ?,"
              + " locked_at = now() - ? * interval '1 millisecond' WHERE id = ?",
          worker,
          lockedAgoMs,
          id);
    }
    ids.add(id);
    return id;
  }

  /** Deletes every job added. */
  public void deleteAll() {
    Db.update(
        "DELETE FROM graphile_worker._private_jobs WHERE id = ANY(?::bigint[])",
        "{" + String.join(",", ids.stream().map(String::valueOf).toList()) + "}");
    ids.clear();
  }
}
