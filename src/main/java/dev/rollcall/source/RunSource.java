package dev.rollcall.source;

import dev.rollcall.queue.QueueLocks;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.SqlClient;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/** Where one namespace's runs are read from. Implementations read ids, names and status only. */
public interface RunSource {

  /** The namespace this source serves. */
  String namespace();

  /** A short description for health details and logs, for example the qualified table. */
  String describe();

  /** The queue name the engine routes a run of this workflow with. */
  String queueName(String workflowName);

  /** True when the run has not started yet (reason {@code pending}). */
  boolean isPending(ScannedRun run);

  /** The status values of runs that may need recovery. */
  List<String> activeStatuses();

  /** True when a run in this status may need recovery. */
  default boolean isActive(ScannedRun run) {
    return activeStatuses().contains(run.status());
  }

  /** The bound of a new epoch: the largest run id and the database time, right now. */
  Uni<Snapshot> snapshot(SqlClient client);

  /**
   * The next page of active runs within the snapshot, in id order, strictly after {@code after}.
   * Fewer than {@code limit} runs means the scan is finished. A run the engine touched within
   * {@code activityFence} (by the database's clock) is marked recently active.
   */
  Uni<List<ScannedRun>> page(
      SqlClient client,
      Snapshot snapshot,
      Optional<String> after,
      int limit,
      Duration activityFence);

  /** The current state of these runs, whatever their status; runs that do not exist are absent. */
  Uni<Map<String, ScannedRun>> lookup(
      SqlClient client, Collection<String> runIds, Duration activityFence);

  /** The namespace's job queue, when Rollcall knows how to release a dead worker's locks in it. */
  default Optional<QueueLocks> queue() {
    return Optional.empty();
  }

  /** Fails unless every column the scan reads is readable. */
  Uni<Void> probe(SqlClient client);
}
