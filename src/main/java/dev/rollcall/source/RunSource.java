package dev.rollcall.source;

import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.SqlClient;
import java.util.List;
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

  /** The bound of a new epoch: the largest run id and the database time, right now. */
  Uni<Snapshot> snapshot(SqlClient client);

  /**
   * The next page of active runs within the snapshot, in id order, strictly after {@code after}.
   * Fewer than {@code limit} runs means the scan is finished.
   */
  Uni<List<ScannedRun>> page(
      SqlClient client, Snapshot snapshot, Optional<String> after, int limit);

  /** Fails unless every column the scan reads is readable. */
  Uni<Void> probe(SqlClient client);
}
