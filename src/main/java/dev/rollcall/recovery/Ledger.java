package dev.rollcall.recovery;

import dev.rollcall.queue.QueueLocks;
import dev.rollcall.source.Mend;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.SqlClient;
import io.vertx.mutiny.sqlclient.Tuple;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.List;
import java.util.Map;
import java.util.UUID;

/**
 * The ledger's writes. A hand-out's row is written once, with its outcome ({@link #OUTCOMES});
 * while its batch is leased the hand-out is the batch's {@code batch_runs} row (V18). The other
 * rows: runs deferred or skipped by an epoch, and queue locks released for a dead instance or as
 * orphans. A run parked for months is skipped by every sweep; the ledger keeps only its first
 * deferral or skip of each kind since it was last handed out (enough to answer why it is not
 * re-driven), and every pass counts its verdicts in {@code epoch_counts}.
 */
@ApplicationScoped
public class Ledger {

  /**
   * Adds a page's verdicts to the epoch's counts ($1 the epoch, $2 the outcome, $3 each verdict's
   * reason). Pages of one pass are classified in parallel: each transaction adds to its own part of
   * the count (its transaction id modulo 64, V13), so it never waits for the row lock of another
   * classification that has not committed yet. Transactions that share a part are 64 or more ids
   * apart; they then wait for one another, as every one did with a single row, and take the part's
   * rows in reason order, so that they cannot deadlock.
   */
  static final String COUNT =
      "INSERT INTO rollcall.epoch_counts (epoch_id, outcome, reason, part, runs)"
          + " SELECT $1, $2, u.reason, (txid_current() % 64)::smallint, count(*)"
          + " FROM unnest($3::text[]) AS u(reason) GROUP BY u.reason ORDER BY u.reason"
          + " ON CONFLICT (epoch_id, outcome, reason, part)"
          + " DO UPDATE SET runs = epoch_counts.runs + excluded.runs";

  /**
   * Writes the outcome of every hand-out of batch $1 under fence $2: {@code $4} for the runs in $3,
   * {@code $5} for the others. Called while the batch row is locked and before its claimer or lease
   * time change, which the rows take from it: the claimer as the instance, the lease time as {@code
   * recorded_at}. Rows already written as {@code leased} (batches leased before V18) or {@code
   * abandoned} (a holder completing a batch its closed epoch gave up) are updated instead; a batch
   * has rows of one kind or the other under one fence, never both, so nothing is written twice.
   */
  public static final String OUTCOMES =
      "WITH updated AS (UPDATE rollcall.ledger SET resolved_at = now(),"
          + "   outcome = CASE WHEN run_id = ANY($3::text[]) THEN $4 ELSE $5 END"
          + "   WHERE batch_id = $1 AND fence = $2 AND outcome IN ('leased', 'abandoned')"
          + "   RETURNING 1)"
          + " INSERT INTO rollcall.ledger (namespace, run_id, epoch_id, batch_id, fence,"
          + " instance_id, reason, outcome, detail, recorded_at, resolved_at)"
          + " SELECT e.namespace, r.run_id, b.epoch_id, b.id, $2, b.claimer_id, r.reason,"
          + " CASE WHEN r.run_id = ANY($3::text[]) THEN $4 ELSE $5 END,"
          + " 're-drive with message ' || r.message_id, b.leased_at, now()"
          + " FROM rollcall.batches b"
          + " JOIN rollcall.batch_runs r ON r.batch_id = b.id"
          + " JOIN rollcall.epochs e ON e.id = b.epoch_id"
          + " WHERE b.id = $1 AND NOT EXISTS (SELECT 1 FROM updated)";

  /** {@link #OUTCOMES} with one outcome for every run of the batch. */
  public static Uni<Void> outcome(SqlClient client, long batchId, int fence, String outcome) {
    return client
        .preparedQuery(OUTCOMES)
        .execute(Tuple.of(batchId, fence, new String[0], outcome, outcome))
        .replaceWithVoid();
  }

  /**
   * Counts the verdicts on the epoch, and writes a ledger row for each run that has no row of this
   * outcome and reason since its last hand-out. Each look-back walks the run's ledger index from
   * its newest row and stops at its last hand-out: a few rows, however long its history.
   */
  public Uni<Void> record(
      SqlClient client, Epoch epoch, List<Verdict> verdicts, String outcome, UUID instanceId) {
    if (verdicts.isEmpty()) {
      return Uni.createFrom().voidItem();
    }
    String[] ids = verdicts.stream().map(Verdict::runId).toArray(String[]::new);
    String[] reasons = verdicts.stream().map(v -> v.reason().wire()).toArray(String[]::new);
    return client
        .preparedQuery(COUNT)
        .execute(Tuple.of(epoch.id(), outcome, reasons))
        .chain(
            () ->
                client
                    .preparedQuery(
                        "INSERT INTO rollcall.ledger (namespace, run_id, epoch_id, instance_id,"
                            + " reason, outcome, resolved_at)"
                            + " SELECT $1, u.run_id, $2, $3, u.reason, $4,"
                            + " CASE WHEN $4 = 'deferred' THEN NULL ELSE now() END"
                            + " FROM unnest($5::text[], $6::text[]) AS u(run_id, reason)"
                            + " WHERE NOT EXISTS (SELECT 1 FROM rollcall.ledger l"
                            + "   WHERE l.namespace = $1 AND l.run_id = u.run_id"
                            + "   AND l.outcome = $4 AND l.reason = u.reason"
                            + "   AND l.id > coalesce((SELECT max(h.id) FROM rollcall.ledger h"
                            + "     WHERE h.namespace = $1 AND h.run_id = u.run_id"
                            + "     AND h.batch_id IS NOT NULL), 0))")
                    .execute(
                        Tuple.of(epoch.namespace(), epoch.id(), instanceId, outcome, ids, reasons)))
        .replaceWithVoid();
  }

  /** The re-check of these deferred runs happened: their {@code deferred} rows are resolved. */
  public Uni<Void> resolveDeferrals(SqlClient client, Epoch epoch, String[] runIds) {
    return client
        .preparedQuery(
            // By run (ledger_by_run): the epoch's index does not hold the outcome.
            "UPDATE rollcall.ledger SET resolved_at = now() WHERE namespace = $3"
                + " AND run_id = ANY($2::text[]) AND epoch_id = $1"
                + " AND outcome = 'deferred' AND resolved_at IS NULL")
        .execute(Tuple.of(epoch.id(), runIds, epoch.namespace()))
        .replaceWithVoid();
  }

  /**
   * One row per released queue lock, under the run its job belongs to ({@code job:<id>} when the
   * payload names none), with its proof in the detail: outcome {@code lock-released}, reason {@code
   * owner-dead} for a takeover's (epoch and dead instance given) and {@code orphaned-lock} for an
   * orphan's (no epoch; the instance the worker was learned for, if any).
   */
  public Uni<Void> locksReleased(
      SqlClient client, LockRelease release, List<QueueLocks.ReleasedLock> locks) {
    if (locks.isEmpty()) {
      return Uni.createFrom().voidItem();
    }
    String[] runIds = new String[locks.size()];
    String[] details = new String[locks.size()];
    String[] owners = new String[locks.size()];
    for (int i = 0; i < locks.size(); i++) {
      QueueLocks.ReleasedLock lock = locks.get(i);
      runIds[i] = lock.runId() == null ? "job:" + lock.jobId() : lock.runId();
      UUID owner = release.instanceId() != null ? release.instanceId() : lock.ownerId();
      owners[i] = owner == null ? null : owner.toString();
      details[i] =
          "released job "
              + lock.jobId()
              + " ("
              + lock.taskIdentifier()
              + (lock.messageId() == null ? "" : ", message " + lock.messageId())
              + ") locked by worker "
              + lock.workerId()
              + ": "
              + lock.proof();
    }
    return client
        .preparedQuery(
            "INSERT INTO rollcall.ledger"
                + " (namespace, run_id, epoch_id, instance_id, reason, outcome, detail, resolved_at)"
                + " SELECT $1, u.run_id, $2, u.owner::uuid, $3, 'lock-released', u.detail, now()"
                + " FROM unnest($4::text[], $5::text[], $6::text[]) AS u(run_id, owner, detail)")
        .execute(
            Tuple.of(
                release.namespace(),
                release.epochId(),
                release.reason().wire(),
                runIds,
                owners,
                details))
        .replaceWithVoid();
  }

  /**
   * Whose queue locks a release frees, and why: a takeover's (its epoch and the dead instance,
   * {@code owner-dead}) or an orphan sweep's (neither; {@code orphaned-lock}, each lock's row under
   * the instance its worker was learned for, if any).
   */
  public record LockRelease(String namespace, Long epochId, UUID instanceId, Reason reason) {

    /** The locks of dead instance {@code instanceId}, released by takeover {@code epochId}. */
    public static LockRelease ofDeadOwner(String namespace, long epochId, UUID instanceId) {
      return new LockRelease(namespace, epochId, instanceId, Reason.OWNER_DEAD);
    }

    /** Locks no instance owns, released by the reaper's orphan sweep. */
    public static LockRelease orphaned(String namespace) {
      return new LockRelease(namespace, null, null, Reason.ORPHANED_LOCK);
    }
  }

  /**
   * One row per torn write mended (see {@link TornRuns}): outcome {@code torn-repaired}, under the
   * reason the run was in the epoch's hands for, the dead instance for a takeover's, and in the
   * detail the step or wait, the evidence and what was written.
   */
  public Uni<Void> tornRepaired(
      SqlClient client, TornRuns.Scope scope, Map<String, String> reasons, List<Mend> mends) {
    if (mends.isEmpty()) {
      return Uni.createFrom().voidItem();
    }
    String[] runIds = mends.stream().map(Mend::runId).toArray(String[]::new);
    String[] why = mends.stream().map(m -> reasons.get(m.runId())).toArray(String[]::new);
    String[] details = mends.stream().map(Mend::detail).toArray(String[]::new);
    return client
        .preparedQuery(
            "INSERT INTO rollcall.ledger"
                + " (namespace, run_id, epoch_id, instance_id, reason, outcome, detail, resolved_at)"
                + " SELECT $1, u.run_id, $2, $3, u.reason, 'torn-repaired', u.detail, now()"
                + " FROM unnest($4::text[], $5::text[], $6::text[]) AS u(run_id, reason, detail)")
        .execute(
            Tuple.of(
                scope.source().namespace(),
                scope.epochId(),
                scope.deadInstance(),
                runIds,
                why,
                details))
        .replaceWithVoid();
  }
}
