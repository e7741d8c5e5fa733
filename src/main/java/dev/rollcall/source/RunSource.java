package dev.rollcall.source;

import dev.rollcall.queue.QueueLocks;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.SqlClient;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

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

  /**
   * As {@link #page}, strictly after the scan cursor that the row of epoch {@code epochId} holds
   * when this statement runs (the row must hold one). Sent right behind the statement that locks
   * that row, on the same connection, it reads the page the lock holder may cut without waiting for
   * the lock's answer first: the lock is held for one round trip fewer.
   */
  Uni<List<ScannedRun>> pageAfterEpochCursor(
      SqlClient client, Snapshot snapshot, long epochId, int limit, Duration activityFence);

  /** The current state of these runs, whatever their status; runs that do not exist are absent. */
  Uni<Map<String, ScannedRun>> lookup(
      SqlClient client, Collection<String> runIds, Duration activityFence);

  /** The namespace's job queue, when Rollcall knows how to release a dead worker's locks in it. */
  default Optional<QueueLocks> queue() {
    return Optional.empty();
  }

  /**
   * True when this source reads engine evidence (steps, waits, queue) to classify runs; false when
   * every active run is re-driven on its status alone (fail open).
   */
  default boolean classifies() {
    return false;
  }

  /**
   * Prepares what a new epoch's classification needs, once (e.g. decodes queued jobs into {@code
   * rollcall.epoch_wake_jobs}, which is emptied once the epoch has closed), and returns the last
   * queue job that preparation answers for ({@code rollcall.epochs.wake_jobs_through}, recorded by
   * {@code recovery.Epochs#prepare}); empty when it answers for none.
   */
  default Uni<Optional<Long>> prepareEpoch(SqlClient client, long epochId) {
    return Uni.createFrom().item(Optional.empty());
  }

  /**
   * Engine evidence per run, for a page of runs, in a few set-based queries. {@code epochId} is the
   * epoch whose prepared evidence to use, or null to read the queue directly (a takeover of a few
   * runs). Runs without evidence may be absent from the map.
   */
  default Uni<Map<String, Evidence>> evidence(
      SqlClient client, Long epochId, Collection<String> runIds, Duration activityFence) {
    return Uni.createFrom().item(Map.of());
  }

  /**
   * Repairs the writes the engine tore in these runs (a row written, its event not, because the
   * process died between two statements), inside the caller's transaction, and says what it did.
   * The caller passes only runs whose owner is dead or gone and that no live instance executes. An
   * engine that writes atomically has nothing to mend: the default finds nothing.
   */
  default Uni<List<Mend>> mendTorn(SqlClient client, Collection<String> runIds) {
    return Uni.createFrom().item(List.of());
  }

  /**
   * {@link #mendTorn} for those of these runs the engine wrote nothing to (no event) within {@code
   * quiet}: a takeover's re-check of runs no live instance reports any more, where a live process
   * may have taken the run up since its last report. A torn write that stayed unexplained that long
   * is no live process's write half-way through (the engine's two statements follow each other
   * within milliseconds).
   */
  default Uni<List<Mend>> mendTornIfQuiet(
      SqlClient client, Collection<String> runIds, java.time.Duration quiet) {
    return Uni.createFrom().item(List.of());
  }

  /**
   * True when this engine can tear a write, so that {@link #mendTorn} has something to look for.
   */
  default boolean tearsWrites() {
    return false;
  }

  /**
   * Those of these runs with a write {@link #mendTorn} would mend, found without mending it. An
   * engine that writes atomically has none.
   */
  default Uni<java.util.Set<String>> tornIn(SqlClient client, Collection<String> runIds) {
    return Uni.createFrom().item(java.util.Set.of());
  }

  /**
   * {@link #mendTorn} for a takeover's runs, some of which a live process may execute too: only the
   * torn writes no live delivery can be making (the engine's queue shows which deliveries are under
   * way; {@code deliveries} are the dead instance's, whose locks the takeover released).
   */
  default Uni<List<Mend>> mendTornUndelivered(
      SqlClient client, Collection<String> runIds, DeadDeliveries deliveries) {
    return Uni.createFrom().item(List.of());
  }

  /**
   * Of these runs, those with a step interrupted while one of {@code ownerMessages} owned it inline
   * (pending or running, its latest start naming that message), each with that message: the engine
   * re-runs such a step only when exactly that message is delivered. Empty for an engine without
   * inline ownership.
   */
  default Uni<Map<String, String>> interruptedStepOwners(
      SqlClient client, Collection<String> runIds, Collection<String> ownerMessages) {
    return Uni.createFrom().item(Map.of());
  }

  /**
   * Of these owner messages ({@link #interruptedStepOwners}), those a queued job can still deliver
   * (not exhausted, locked or not); each such job is made unreplaceable in the same statement, its
   * key removed, so that a peer that queues the same step again adds a job of its own beside it
   * instead of overwriting the owner's message. Empty for an engine without inline ownership.
   */
  default Uni<Set<String>> keepOwnerJobs(SqlClient client, Collection<String> ownerMessages) {
    return Uni.createFrom().item(Set.of());
  }

  /** Of runs re-driven at the given times, those the engine has not touched since. */
  default Uni<Set<String>> unchangedSince(SqlClient client, Map<String, OffsetDateTime> redriven) {
    return Uni.createFrom().item(Set.of());
  }

  /**
   * The statement that creates a partial index on the runs table's id for active runs only, with
   * which a scan reads about one row per active run. The scan's own predicate implies the index's,
   * so the planner can use it.
   */
  default Optional<String> activeIndexDdl() {
    return Optional.empty();
  }

  /** Fails unless every column the scan reads is readable. */
  Uni<Void> probe(SqlClient client);
}
