package dev.rollcall.recovery;

import dev.rollcall.config.RollcallConfig;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.SqlClient;
import io.vertx.mutiny.sqlclient.Tuple;
import jakarta.enterprise.context.ApplicationScoped;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.stream.StreamSupport;

/**
 * Runs an epoch deferred. In a pass, a run deferred because a live instance owned it may be
 * re-checked at once; one deferred for recent activity only after the activity fence has passed, so
 * that a peer that just started it has had a heartbeat to report it. A takeover's run deferred for
 * a live owner is re-checked a heartbeat interval after its deferral (the owner's next report), and
 * deferred again while the owner still reports it ({@link #again}); one deferred for a queued job a
 * heartbeat interval after its deferral too.
 */
@ApplicationScoped
public class Deferrals {

  private final Ledger ledger;
  private final RollcallConfig config;

  Deferrals(Ledger ledger, RollcallConfig config) {
    this.ledger = ledger;
    this.config = config;
  }

  /** Defers these runs in the epoch and records it in the ledger. */
  public Uni<Void> defer(SqlClient client, Epoch epoch, List<Verdict> deferred) {
    if (deferred.isEmpty()) {
      return Uni.createFrom().voidItem();
    }
    return client
        .preparedQuery(
            "INSERT INTO rollcall.deferred"
                + " (epoch_id, run_id, workflow_name, reason, owner_message_id)"
                + " SELECT $1, u.run_id, u.workflow_name, u.reason, u.owner_message_id"
                + " FROM unnest($2::text[], $3::text[], $4::text[], $5::text[])"
                + " AS u(run_id, workflow_name, reason, owner_message_id) ON CONFLICT DO NOTHING")
        .execute(
            Tuple.of(
                epoch.id(),
                deferred.stream().map(Verdict::runId).toArray(String[]::new),
                deferred.stream().map(Verdict::workflowName).toArray(String[]::new),
                deferred.stream().map(v -> v.reason().wire()).toArray(String[]::new),
                deferred.stream().map(Verdict::messageId).toArray(String[]::new)))
        .chain(() -> ledger.record(client, epoch, deferred, "deferred", null));
  }

  /**
   * How long after its deferral a run deferred for a live owner is re-checked: in a takeover a
   * heartbeat interval (the owner's next report says whether it still executes the run), in a pass
   * at once (still owned then, it is skipped for good).
   */
  static long ownedRecheckAfterMs(Epoch epoch, Duration heartbeatInterval) {
    return epoch.kind() == EpochKind.TAKEOVER ? heartbeatInterval.toMillis() : 0;
  }

  /**
   * How long after its deferral any other deferred run is re-checked: in a takeover (a run with a
   * queued job) a heartbeat interval, time for a live worker to pick the job up; in a pass the
   * activity fence, so that a peer that just started the run has had a heartbeat to report it.
   */
  static long othersRecheckAfterMs(Epoch epoch, Duration heartbeatInterval, Duration fence) {
    return (epoch.kind() == EpochKind.TAKEOVER ? heartbeatInterval : fence).toMillis();
  }

  /**
   * Whether a takeover still waits for a queued job to wake a run it deferred: for twice the lease
   * TTL after it opened. A released job runs within a worker's poll interval; one that keeps
   * failing is retried after about 3 s, then 7 s, and has no attempt left after that (the engine's
   * jobs have three). Past the window a queued job is a wake path the run waits for (a sleep's).
   */
  static boolean jobMayStillRun(Epoch epoch, Duration leaseTtl) {
    return epoch.ageMs() < 2 * leaseTtl.toMillis();
  }

  /**
   * The epoch's deferred runs whose re-check is due, at most {@code limit}, by its kind's rule
   * ({@link #ownedRecheckAfterMs}, {@link #othersRecheckAfterMs}).
   */
  public Uni<List<String>> due(SqlClient client, Epoch epoch, int limit) {
    return due(
        client,
        epoch.id(),
        othersRecheckAfterMs(epoch, config.heartbeatInterval(), config.effectiveActivityFence()),
        ownedRecheckAfterMs(epoch, config.heartbeatInterval()),
        limit);
  }

  /**
   * Deferred runs whose re-check is due, at most {@code limit}: those deferred for a live owner
   * {@code ownedAfterMs} after their deferral, the others {@code othersAfterMs} after it.
   */
  private Uni<List<String>> due(
      SqlClient client, long epochId, long othersAfterMs, long ownedAfterMs, int limit) {
    return client
        .preparedQuery(
            "SELECT run_id FROM rollcall.deferred WHERE epoch_id = $1"
                + " AND deferred_at <= now() - CASE WHEN reason = 'owned-by-live-instance'"
                + "   THEN $4::bigint ELSE $2::bigint END * interval '1 millisecond'"
                + " ORDER BY run_id LIMIT $3")
        .execute(Tuple.of(epochId, othersAfterMs, limit, ownedAfterMs))
        .map(
            rows ->
                StreamSupport.stream(rows.spliterator(), false)
                    .map(r -> r.getString("run_id"))
                    .toList());
  }

  /**
   * Of the runs {@code runIds} epoch $3 deferred, those another epoch of its namespace has handed
   * out since their deferral, or holds in a batch to hand out now. A pass defers a run a live
   * instance executes; when that instance dies before the re-check, its takeover (opened in the
   * transaction that declared the death) hands the run out, and the pass's re-check, seeing no live
   * owner, would hand it out a second time. Reads: the open epochs' ready and leased batches (an
   * open epoch's few, probed by key; a closed epoch has none), and each run's ledger index from its
   * newest row back to the deferral (a handed-out row is written at its outcome: {@code enqueued},
   * or {@code leased} for a batch leased before V18). A hand-out that failed is no hand-out. For a
   * pass ($4), a run an open takeover holds deferred too.
   */
  static final String HANDED_OUT_ELSEWHERE =
      "SELECT d.run_id FROM rollcall.deferred d"
          + " WHERE d.epoch_id = $3 AND d.run_id = ANY($2::text[])"
          + " AND (EXISTS (SELECT 1 FROM rollcall.epochs e"
          + "        JOIN rollcall.batches b ON b.epoch_id = e.id"
          + "          AND b.state IN ('ready', 'leased')"
          + "        JOIN rollcall.batch_runs r ON r.batch_id = b.id AND r.run_id = d.run_id"
          + "       WHERE e.namespace = $1 AND e.state = 'open' AND e.id <> $3)"
          + "   OR EXISTS (SELECT 1 FROM rollcall.ledger l"
          + "       WHERE l.namespace = $1 AND l.run_id = d.run_id AND l.epoch_id <> $3"
          + "         AND l.outcome IN ('enqueued', 'leased')"
          + "         AND l.recorded_at >= d.deferred_at)"
          // A pass's re-check leaves a run an open takeover holds deferred to that takeover (it
          // re-checks the run itself); a takeover's does not (two takeovers would each leave the
          // run to the other).
          + "   OR ($4 AND EXISTS (SELECT 1 FROM rollcall.epochs t"
          + "        JOIN rollcall.deferred td ON td.epoch_id = t.id AND td.run_id = d.run_id"
          + "       WHERE t.namespace = $1 AND t.state = 'open' AND t.kind = 'takeover')))";

  /** {@link #HANDED_OUT_ELSEWHERE} for these runs of {@code epoch}. */
  public Uni<Set<String>> handedOutElsewhere(SqlClient client, Epoch epoch, List<String> runIds) {
    if (runIds.isEmpty()) {
      return Uni.createFrom().item(Set.of());
    }
    return client
        .preparedQuery(HANDED_OUT_ELSEWHERE)
        .execute(
            Tuple.of(
                epoch.namespace(),
                runIds.toArray(String[]::new),
                epoch.id(),
                epoch.kind() != EpochKind.TAKEOVER))
        .map(
            rows ->
                StreamSupport.stream(rows.spliterator(), false)
                    .map(r -> r.getString("run_id"))
                    .collect(Collectors.toSet()));
  }

  /**
   * The owner messages the deferrals of {@code runIds} carry (a takeover's re-drive of a step a
   * dead step message owned inline), by run; runs without one are absent.
   */
  public Uni<Map<String, String>> ownerMessages(
      SqlClient client, long epochId, List<String> runIds) {
    return client
        .preparedQuery(
            "SELECT run_id, owner_message_id FROM rollcall.deferred WHERE epoch_id = $1"
                + " AND run_id = ANY($2::text[]) AND owner_message_id IS NOT NULL")
        .execute(Tuple.of(epochId, runIds.toArray(String[]::new)))
        .map(
            rows -> {
              Map<String, String> out = new HashMap<>();
              rows.forEach(r -> out.put(r.getString("run_id"), r.getString("owner_message_id")));
              return out;
            });
  }

  /**
   * The re-check deferred these runs again (a live instance still reports the run, or a queued job
   * may still wake it): they stay deferred, for the reason found now, due again a re-check interval
   * from now (the transaction's now: not due again in this claim), and keep the owner message a
   * verdict names (the one that owns the run's interrupted step: {@link TornRuns#redriveOwners}).
   */
  public Uni<Void> again(SqlClient client, long epochId, List<Verdict> deferred) {
    if (deferred.isEmpty()) {
      return Uni.createFrom().voidItem();
    }
    return client
        .preparedQuery(
            "UPDATE rollcall.deferred d SET deferred_at = now(), reason = u.reason,"
                + " owner_message_id = coalesce(u.owner_message_id, d.owner_message_id)"
                + " FROM unnest($2::text[], $3::text[], $4::text[])"
                + " AS u(run_id, reason, owner_message_id)"
                + " WHERE d.epoch_id = $1 AND d.run_id = u.run_id")
        .execute(
            Tuple.of(
                epochId,
                deferred.stream().map(Verdict::runId).toArray(String[]::new),
                deferred.stream().map(v -> v.reason().wire()).toArray(String[]::new),
                deferred.stream().map(Verdict::messageId).toArray(String[]::new)))
        .replaceWithVoid();
  }

  /** Drops every deferral of a closing epoch: no re-check of its runs follows. */
  public Uni<Void> forget(SqlClient client, long epochId) {
    return client
        .preparedQuery("DELETE FROM rollcall.deferred WHERE epoch_id = $1")
        .execute(Tuple.of(epochId))
        .replaceWithVoid();
  }

  /** The re-check happened: the runs leave the deferred set and their deferral is resolved. */
  public Uni<Void> resolve(SqlClient client, Epoch epoch, List<String> runIds) {
    String[] ids = runIds.toArray(String[]::new);
    return client
        .preparedQuery(
            "DELETE FROM rollcall.deferred WHERE epoch_id = $1 AND run_id = ANY($2::text[])")
        .execute(Tuple.of(epoch.id(), ids))
        .chain(() -> ledger.resolveDeferrals(client, epoch, ids))
        .replaceWithVoid();
  }
}
