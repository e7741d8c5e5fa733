package dev.rollcall.recovery;

import dev.rollcall.source.RunSource;
import dev.rollcall.source.Snapshot;
import dev.rollcall.source.WakeJobs;
import dev.rollcall.tracing.RecoveryTraces;
import io.opentelemetry.api.trace.Span;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Row;
import io.vertx.mutiny.sqlclient.RowSet;
import io.vertx.mutiny.sqlclient.SqlClient;
import io.vertx.mutiny.sqlclient.Tuple;
import jakarta.enterprise.context.ApplicationScoped;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import org.jboss.logging.Logger;

/** The SQL of epochs. Every state change is one guarded statement. */
@ApplicationScoped
public class Epochs {

  private static final Logger LOG = Logger.getLogger(Epochs.class);

  private final RecoveryTraces traces;
  private final Batches batches;
  private final Deferrals deferrals;

  Epochs(RecoveryTraces traces, Batches batches, Deferrals deferrals) {
    this.traces = traces;
    this.batches = batches;
    this.deferrals = deferrals;
  }

  /**
   * Makes {@code pass} (the span that opened the epoch) the trace context the epoch's row carries,
   * so that its hand-outs and its close join its trace; nothing to write when tracing is off.
   */
  public Uni<Void> carryTrace(SqlClient client, long epochId, Span pass) {
    Optional<String> traceParent = RecoveryTraces.traceParent(pass);
    if (traceParent.isEmpty()) {
      return Uni.createFrom().voidItem();
    }
    return client
        .preparedQuery("UPDATE rollcall.epochs SET trace_parent = $2 WHERE id = $1")
        .execute(Tuple.of(epochId, traceParent.get()))
        .replaceWithVoid();
  }

  /** A pass opened without a death behind it (boot, sweep): a trace of its own. */
  private Uni<Void> traceOpened(SqlClient client, long epochId, String kind, String namespace) {
    Span pass = traces.passOpened(kind, epochId, namespace, null);
    return carryTrace(client, epochId, pass).onTermination().invoke(pass::end);
  }

  /** The close of the epoch of a {@code RETURNING id, namespace, kind, trace_parent} row. */
  private void traceClosed(Row r, String reason) {
    traces.closed(
        r.getString("trace_parent"),
        r.getString("kind"),
        r.getLong("id"),
        r.getString("namespace"),
        reason);
  }

  /** The boot epoch of a deploy, if one was created. */
  public Uni<Optional<Epoch>> findBoot(SqlClient client, String namespace, String deploymentId) {
    return client
        .preparedQuery(
            "SELECT "
                + Epoch.COLUMNS
                + " FROM rollcall.epochs"
                + " WHERE namespace = $1 AND kind = 'boot' AND deployment_id = $2")
        .execute(Tuple.of(namespace, deploymentId))
        .map(Epochs::first);
  }

  /**
   * Creates the boot epoch of a deploy unless a concurrent claimer (on any service replica) did so
   * first: the unique index on (namespace, deployment_id) for kind boot makes the losers' insert a
   * no-op after the winner commits, so the losers wait for the winner's transaction. Keep that
   * transaction short: the creator closes the passes it supersedes ({@link
   * StrandedEpochs#closeSuperseded}) in a transaction of its own, after this one committed. Returns
   * the new epoch's id when this call created it.
   */
  public Uni<Optional<Long>> createBoot(
      SqlClient client, String namespace, String deploymentId, Snapshot snapshot, UUID creator) {
    return client
        .preparedQuery(
            "INSERT INTO rollcall.epochs"
                + " (namespace, kind, deployment_id, snapshot_max_id, snapshot_at, created_by)"
                + " VALUES ($1, 'boot', $2, $3, $4, $5)"
                + " ON CONFLICT (namespace, deployment_id) WHERE kind = 'boot' DO NOTHING"
                + " RETURNING id")
        .execute(
            Tuple.of(namespace, deploymentId, snapshot.maxRunId(), snapshot.takenAt(), creator))
        .map(
            rows -> {
              if (rows.size() == 0) {
                return Optional.<Long>empty();
              }
              long id = rows.iterator().next().getLong("id");
              LOG.infof(
                  "epoch %d opened: boot of deployment %s in namespace %s (snapshot max id %s)",
                  id, deploymentId, namespace, snapshot.maxRunId());
              return Optional.of(id);
            })
        .call(
            id ->
                id.isEmpty()
                    ? Uni.createFrom().voidItem()
                    : traceOpened(client, id.get(), EpochKind.BOOT.wire(), namespace));
  }

  /**
   * The epochs of a namespace that every instance serves and that are open (takeovers, sweeps,
   * manual passes), as a condition on an unaliased {@code rollcall.epochs}: the partial index of
   * open epochs answers it.
   */
  static final String OPEN_SHARED = "rollcall.serves(kind, deployment_id, NULL) AND state = 'open'";

  /**
   * The open epochs of a namespace that every instance serves, in the order claims serve them:
   * takeovers first (oldest first), then sweeps and manual passes.
   */
  public Uni<List<Epoch>> openShared(SqlClient client, String namespace) {
    return client
        .preparedQuery(
            "SELECT "
                + Epoch.COLUMNS
                // No deployment: the epochs every instance serves; the caller adds its own
                // deploy's boot epoch (ClaimService).
                + " FROM rollcall.epochs WHERE namespace = $1 AND "
                + OPEN_SHARED
                + " ORDER BY (kind = 'takeover') DESC, id")
        .execute(Tuple.of(namespace))
        .map(
            rows -> {
              List<Epoch> list = new ArrayList<>(rows.size());
              rows.forEach(r -> list.add(Epoch.from(r)));
              return list;
            });
  }

  /**
   * Opens a sweep of the namespace unless one is open or one opened within {@code intervalMs} (by
   * any service replica: the namespace's advisory lock serialises the check, the unique index on
   * open sweeps backs it), and only while an instance is live to claim it.
   */
  public Uni<Optional<Epoch>> openSweep(
      SqlClient client, String namespace, Snapshot snapshot, long intervalMs, long quietMs) {
    return client
        .preparedQuery("SELECT pg_advisory_xact_lock(hashtext('rollcall.sweep.' || $1))")
        .execute(Tuple.of(namespace))
        .chain(
            () ->
                client
                    .preparedQuery(
                        "INSERT INTO rollcall.epochs (namespace, kind, snapshot_max_id,"
                            + " snapshot_at) SELECT $1, 'sweep', $2, $3"
                            + " WHERE EXISTS (SELECT 1 FROM rollcall.instances i"
                            + "   WHERE i.namespace = $1"
                            + "   AND rollcall.is_live(i.state, i.lease_expires_at))"
                            + " AND NOT EXISTS (SELECT 1 FROM rollcall.epochs e"
                            + "   WHERE e.namespace = $1 AND e.kind = 'sweep' AND (e.state = 'open'"
                            + "   OR e.created_at > now() - $4::bigint * interval '1 millisecond'))"
                            // A deploy is recovering (its boot pass is open, or its instances
                            // are still registering): that pass covers every run; a sweep now
                            // would only hand the same runs out again.
                            + " AND NOT EXISTS (SELECT 1 FROM rollcall.epochs e"
                            + "   WHERE e.namespace = $1 AND e.kind = 'boot' AND e.state = 'open')"
                            + " AND NOT EXISTS (SELECT 1 FROM rollcall.instances i"
                            + "   WHERE i.namespace = $1"
                            + "   AND i.registered_at > now() - $5::bigint * interval '1 millisecond')"
                            + " ON CONFLICT (namespace) WHERE kind = 'sweep' AND state = 'open'"
                            + " DO NOTHING RETURNING "
                            + Epoch.COLUMNS)
                    .execute(
                        Tuple.of(
                            namespace,
                            snapshot.maxRunId(),
                            snapshot.takenAt(),
                            intervalMs,
                            quietMs)))
        .map(Epochs::first)
        .call(
            opened ->
                opened.isEmpty()
                    ? Uni.createFrom().voidItem()
                    : traceOpened(client, opened.get().id(), EpochKind.SWEEP.wire(), namespace))
        .invoke(
            opened ->
                opened.ifPresent(
                    e ->
                        LOG.infof(
                            "epoch %d opened: sweep of namespace %s (snapshot max id %s)",
                            e.id(), namespace, snapshot.maxRunId())));
  }

  /**
   * Opens a manual pass of the namespace unless one is open (empty then). The caller holds the
   * namespace's manual-pass advisory lock, taken before the snapshot.
   */
  public Uni<Optional<Long>> openManual(SqlClient client, String namespace, Snapshot snapshot) {
    return client
        .preparedQuery(
            "INSERT INTO rollcall.epochs (namespace, kind, snapshot_max_id,"
                + " snapshot_at) SELECT $1, 'manual', $2, $3"
                + " WHERE NOT EXISTS (SELECT 1 FROM rollcall.epochs"
                + "   WHERE namespace = $1 AND kind = 'manual'"
                + "   AND state = 'open') RETURNING id")
        .execute(Tuple.of(namespace, snapshot.maxRunId(), snapshot.takenAt()))
        .map(
            rows ->
                rows.size() == 0
                    ? Optional.<Long>empty()
                    : Optional.of(rows.iterator().next().getLong("id")));
  }

  /**
   * Opens the takeover epoch of a dead or departed instance, unless one exists (the unique index on
   * the subject makes a second opener's insert a no-op). Its runs are cut into ready batches by the
   * caller, so the scan is born finished.
   */
  public Uni<Optional<Epoch>> openTakeover(
      SqlClient client, String namespace, UUID subject, OffsetDateTime leaseExpiredAt) {
    return client
        .preparedQuery(
            "INSERT INTO rollcall.epochs (namespace, kind, subject_instance_id, scan_done,"
                + " subject_lease_expired_at) VALUES ($1, 'takeover', $2, true, $3)"
                + " ON CONFLICT (subject_instance_id) WHERE kind = 'takeover' DO NOTHING"
                + " RETURNING "
                + Epoch.COLUMNS)
        .execute(Tuple.of(namespace, subject, leaseExpiredAt))
        .map(Epochs::first);
  }

  /**
   * Locks an epoch for the rest of the transaction. Cutting a page into a scanning range (which
   * moves the scan cursor) and closing happen only under this lock, so the cursor never forks and
   * an epoch is never closed while a range is being cut; a cut range is a batch, so it holds the
   * epoch open until it is classified. Hold it for one short transaction only.
   */
  public Uni<Epoch> lock(SqlClient client, long epochId) {
    return client
        .preparedQuery(
            "SELECT "
                + Epoch.COLUMNS
                + " FROM rollcall.epochs WHERE id = $1"
                // Not FOR UPDATE: inserting a batch (a foreign key check) must not wait for it.
                + " FOR NO KEY UPDATE")
        .execute(Tuple.of(epochId))
        .map(rows -> first(rows).orElseThrow());
  }

  /**
   * Locks an epoch as {@link #lock} does, unless another transaction holds its lock: then empty at
   * once, without waiting.
   */
  public Uni<Optional<Epoch>> tryLock(SqlClient client, long epochId) {
    return client
        .preparedQuery(
            "SELECT "
                + Epoch.COLUMNS
                + " FROM rollcall.epochs WHERE id = $1 FOR NO KEY UPDATE SKIP LOCKED")
        .execute(Tuple.of(epochId))
        .map(Epochs::first);
  }

  /** Records a cut page: the new cursor, whether the scan is finished, and the runs it read. */
  public Uni<Void> advance(
      SqlClient client, long epochId, Optional<String> cursor, boolean scanDone, int scanned) {
    return client
        .preparedQuery(
            "UPDATE rollcall.epochs SET scan_cursor = coalesce($2, scan_cursor), scan_done = $3,"
                + " runs_scanned = runs_scanned + $4 WHERE id = $1 AND state = 'open'")
        .execute(Tuple.of(epochId, cursor.orElse(null), scanDone, scanned))
        .replaceWithVoid();
  }

  /**
   * An epoch ({@code rollcall.epochs}, id $1) whose pass is over: open, its scan finished, no batch
   * held out ({@link Batches#HELD_OUT}), and no deferred run left to re-check.
   */
  private static final String FINISHED =
      "state = 'open' AND scan_done"
          + " AND NOT EXISTS (SELECT 1 FROM rollcall.batches b"
          + "   WHERE b.epoch_id = $1 AND "
          + Batches.HELD_OUT
          + ")"
          + " AND NOT EXISTS (SELECT 1 FROM rollcall.deferred d WHERE d.epoch_id = $1)";

  /**
   * Whether the epoch's pass is over ({@link #closeIfFinished} would close it), read holding the
   * epoch's row in share mode, in a transaction: a complete asks this after its own commit, before
   * it takes the epoch's lock to close the epoch. Share locks do not wait for one another, so a
   * pass's last completes ask at once rather than one after another; they still wait for a holder
   * of the epoch's lock (a claimer that resolved deferred runs, say, and failed to close because
   * this complete had not committed yet), and the check is a new statement after that wait, so it
   * sees what the holder committed. While another batch or a deferred run is outstanding, whoever
   * settles it closes the epoch: of two completes of the last two batches, at least one checks
   * after the other committed, since each checks after its own commit.
   */
  public Uni<Boolean> finished(SqlClient client, long epochId) {
    return client
        .preparedQuery("SELECT 1 FROM rollcall.epochs WHERE id = $1 FOR SHARE")
        .execute(Tuple.of(epochId))
        .chain(
            () ->
                client
                    .preparedQuery("SELECT 1 FROM rollcall.epochs WHERE id = $1 AND " + FINISHED)
                    .execute(Tuple.of(epochId)))
        .map(rows -> rows.size() == 1);
  }

  /**
   * Closes the epoch if its scan is finished and no batch is ready or leased. Call it only while
   * holding the epoch lock: the check is a new statement, so it sees every batch committed before
   * the lock was granted. Returns true when this call closed it. What the closed epoch no longer
   * needs is left to {@link WakeJobs#forget}, which the caller runs once the close committed: the
   * close (and with it the notice that the pass is over) does not wait for it.
   */
  public Uni<Boolean> closeIfFinished(SqlClient client, long epochId) {
    return client
        .preparedQuery(
            "UPDATE rollcall.epochs SET state = 'closed', close_reason = 'completed',"
                + " closed_at = now() WHERE id = $1 AND "
                + FINISHED
                + " RETURNING id, namespace, kind, trace_parent")
        .execute(Tuple.of(epochId))
        .chain(
            rows -> {
              for (Row r : rows) {
                LOG.infof(
                    "epoch %d closed: %s pass of namespace %s completed",
                    epochId, r.getString("kind"), r.getString("namespace"));
                traceClosed(r, "completed");
              }
              return Uni.createFrom().item(rows.size() == 1);
            });
  }

  /**
   * Prepares a new epoch's evidence from its source ({@link RunSource#prepareEpoch}), in the
   * transaction that opened it, and records the last queue job that evidence answers for.
   */
  public Uni<Void> prepare(SqlClient client, RunSource source, long epochId) {
    return source
        .prepareEpoch(client, epochId)
        .chain(
            through ->
                through.isEmpty()
                    ? Uni.createFrom().voidItem()
                    : client
                        .preparedQuery(
                            "UPDATE rollcall.epochs SET wake_jobs_through = $2 WHERE id = $1")
                        .execute(Tuple.of(epochId, through.get()))
                        .replaceWithVoid());
  }

  /**
   * Closes an open epoch before its pass finished ({@code close_reason} says why: superseded,
   * stranded, closed-by-operator). Its ranges being classified and its ready and leased batches are
   * given up ({@code abandoned}, and the leased ones' hand-outs in the ledger): a holder may still
   * complete its batch, but nothing is handed out again. Its deferred runs are forgotten. Returns
   * true when this call closed it.
   */
  public Uni<Boolean> close(SqlClient client, long epochId, String reason) {
    return client
        .preparedQuery(
            "UPDATE rollcall.epochs SET state = 'closed', close_reason = $2, closed_at = now()"
                + " WHERE id = $1 AND state = 'open' RETURNING id, namespace, kind, trace_parent")
        .execute(Tuple.of(epochId, reason))
        .chain(
            rows -> {
              if (rows.size() == 0) {
                return Uni.createFrom().item(false);
              }
              traceClosed(rows.iterator().next(), reason);
              // Twice: a complete that held one of these batches' rows when the first statement
              // reached it may have added a batch for its failed runs (CompletionService), which
              // that statement's snapshot cannot see. It committed before the first statement
              // returned, so the second sees its batch. A complete after this one finds its batch
              // given up and adds nothing.
              return batches
                  .giveUp(client, epochId)
                  .chain(() -> batches.giveUp(client, epochId))
                  .chain(() -> deferrals.forget(client, epochId))
                  .chain(() -> WakeJobs.forget(client, epochId))
                  .replaceWith(true);
            });
  }

  private static Optional<Epoch> first(RowSet<Row> rows) {
    return rows.size() == 0 ? Optional.empty() : Optional.of(Epoch.from(rows.iterator().next()));
  }
}
