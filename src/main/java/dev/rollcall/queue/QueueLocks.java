package dev.rollcall.queue;

import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.SqlClient;
import java.time.Duration;
import java.util.List;
import java.util.UUID;

/**
 * An engine's job queue, as far as Rollcall touches it: learning which queue workers belong to
 * which instance, and releasing the locks that dead or orphaned workers still hold, so the queue
 * redelivers their jobs at once. Rollcall never deletes, replaces or re-times a job.
 */
public interface QueueLocks {

  /**
   * A job lock that was released, and why that was safe. {@code runId} is null when the payload
   * does not name one, {@code stepId} when the job is not a step's own message; {@code ownerId} is
   * the instance the worker belonged to, null when none owned up to it.
   */
  record ReleasedLock(
      long jobId,
      String taskIdentifier,
      String workerId,
      Delivery delivery,
      UUID ownerId,
      String proof) {

    public String runId() {
      return delivery.runId();
    }

    public String messageId() {
      return delivery.messageId();
    }

    public String stepId() {
      return delivery.stepId();
    }

    /**
     * How the worker was known to be the dead instance's: {@code named} (it registered the worker),
     * {@code learned} (from a message it reported), or {@code orphaned} (no live instance owns it).
     * Read from the start of the proof each release statement writes.
     */
    public String knownBy() {
      if (proof.startsWith("named by instance")) {
        return "named";
      }
      return proof.startsWith("learned for instance") ? "learned" : "orphaned";
    }
  }

  /**
   * What a job delivers, from its payload: the run, the message, and the step of a step message.
   */
  record Delivery(String runId, String messageId, String stepId) {}

  /** A queue message a live instance reports executing. */
  record Reported(UUID instanceId, String messageId) {}

  /**
   * What a lookup of reported messages found: how many workers were new, and the reported messages
   * whose job was locked (its worker is known from now on, whoever showed it first).
   */
  record Learned(int workers, List<Reported> found) {}

  /**
   * Learns the workers of instances from the messages they report executing: the worker that locks
   * the job of such a message is that instance's. Of two instances that show one worker, the first
   * in {@code reported} keeps it.
   */
  Uni<Learned> learnWorkers(SqlClient client, List<Reported> reported);

  /**
   * Releases every lock the workers of a dead or departed instance hold on this namespace's jobs:
   * those it registered, those learned before, and those holding the jobs of the messages it last
   * reported. Never a lock of a worker a live instance owns, nor of a job whose message a live
   * instance reports executing.
   */
  Uni<List<ReleasedLock>> releaseLocksOf(
      SqlClient client, UUID instanceId, List<String> registeredWorkerIds);

  /**
   * Releases the locks on this namespace's keyed jobs held for longer than {@code fence} by a
   * worker that no live instance owns, on jobs whose message no live instance reports executing.
   */
  Uni<List<ReleasedLock>> releaseOrphanedLocks(SqlClient client, Duration fence);
}
