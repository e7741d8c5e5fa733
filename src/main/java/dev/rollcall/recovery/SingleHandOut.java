package dev.rollcall.recovery;

import dev.rollcall.recovery.Verdict.Disposition;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.SqlClient;
import io.vertx.mutiny.sqlclient.Tuple;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.function.Function;
import java.util.stream.Collectors;
import java.util.stream.StreamSupport;

/**
 * One hand-out of a run at a time, whichever epoch decides it. A run that several instances
 * reported in flight belongs to the takeover of each of them, and a run a pass deferred for its
 * owner to that owner's takeover too; each decides in its own transaction, perhaps at the same
 * moment (three app replicas that exit together die in one reaper pass, and their takeovers'
 * re-checks fall due together). Before an epoch hands a run out it takes the run's hand-out lock, a
 * transaction-level advisory lock held until it commits, and only then reads whether another epoch
 * answers for the run already: that read is a statement of its own, so its snapshot sees whatever
 * an earlier holder of the lock committed.
 *
 * <p>The lock is only tried, never waited for: a transaction that holds it may be waiting for rows
 * this one holds (a dying instance's batches and queue jobs, an epoch's batches), and a wait here
 * would close a cycle. A run whose lock another transaction holds is being decided there right now;
 * it is deferred ({@link Reason#HAND_OUT_UNDER_WAY}) and re-checked like any deferred run, when the
 * other epoch's hand-out, if it made one, is in the ledger or in a batch ({@link
 * Deferrals#HANDED_OUT_ELSEWHERE}).
 */
@ApplicationScoped
class SingleHandOut {

  /** The advisory lock class of hand-outs ("RCHD"), the two-int4 form: runs keyed by hash. */
  static final int CLASS_ID = 0x52434844;

  /**
   * Tries the hand-out lock of each of runs $1 (held until the transaction ends; re-entrant within
   * it): which ones this transaction holds now.
   */
  static final String TRY_LOCK =
      "SELECT u.run_id, pg_try_advisory_xact_lock("
          + CLASS_ID
          + ", hashtext(u.run_id)) AS locked"
          + " FROM (SELECT DISTINCT r AS run_id FROM unnest($1::text[]) AS r) u";

  /**
   * Of runs $2, those an open epoch of namespace $1 other than $3 holds in a batch to hand out now
   * (ready, or leased to a claim that has not reported its outcome): an open epoch's few batches,
   * probed by key. Once such a batch is done its runs have their queued jobs, which a takeover's
   * classification sees for itself.
   */
  static final String HELD_ELSEWHERE =
      "SELECT u.run_id FROM unnest($2::text[]) AS u(run_id)"
          + " WHERE EXISTS (SELECT 1 FROM rollcall.epochs e"
          + "   JOIN rollcall.batches b ON b.epoch_id = e.id AND b.state IN ('ready', 'leased')"
          + "   JOIN rollcall.batch_runs r ON r.batch_id = b.id AND r.run_id = u.run_id"
          + "  WHERE e.namespace = $1 AND e.state = 'open' AND e.id <> $3)";

  /**
   * Of runs $2, those another epoch of namespace $1 than pass $3 answers for: one holds the run in
   * a batch to hand out now (as {@link #HELD_ELSEWHERE}), an open takeover holds it deferred (it
   * re-checks the run, and hands it out if it needs it), or another epoch has handed it out since
   * the pass opened (its job, queued after the pass decoded the queue, is not in the pass's proof).
   * A takeover takes its dead instance's runs from the instance's in-flight set in the transaction
   * that declares the death, and a pass's first look reads that set (the run is owned: deferred)
   * before it reads this: one of the two reads sees the run.
   */
  static final String ANSWERED_ELSEWHERE =
      HELD_ELSEWHERE
          + " OR EXISTS (SELECT 1 FROM rollcall.epochs e"
          + "   JOIN rollcall.deferred d ON d.epoch_id = e.id AND d.run_id = u.run_id"
          + "  WHERE e.namespace = $1 AND e.state = 'open' AND e.kind = 'takeover')"
          + " OR EXISTS (SELECT 1 FROM rollcall.ledger l"
          + "  WHERE l.namespace = $1 AND l.run_id = u.run_id AND l.epoch_id <> $3"
          + "  AND l.outcome IN ('enqueued', 'leased')"
          + "  AND l.recorded_at >= (SELECT snapshot_at FROM rollcall.epochs WHERE id = $3))";

  private final Deferrals deferrals;

  SingleHandOut(Deferrals deferrals) {
    this.deferrals = deferrals;
  }

  /**
   * A takeover's first look: of its hand-outs, a run another epoch holds in a batch to hand out is
   * skipped, and one another transaction is deciding is deferred.
   */
  Uni<List<Verdict>> firstLook(SqlClient conn, Epoch epoch, List<Verdict> verdicts) {
    return guard(conn, verdicts, ids -> ids(conn, HELD_ELSEWHERE, epoch, ids));
  }

  /**
   * A pass's first look: of its hand-outs, a run another epoch answers for ({@link
   * #ANSWERED_ELSEWHERE}) is skipped. No hand-out lock is taken: a page holds thousands of runs,
   * and the takeovers a pass could race hand out only runs their instances reported, which the pass
   * sees as owned until they do.
   */
  Uni<List<Verdict>> passFirstLook(SqlClient conn, Epoch epoch, List<Verdict> verdicts) {
    List<String> out =
        Verdicts.of(verdicts, Disposition.HAND_OUT).stream().map(Verdict::runId).toList();
    if (out.isEmpty()) {
      return Uni.createFrom().item(verdicts);
    }
    return ids(conn, ANSWERED_ELSEWHERE, epoch, out)
        .map(found -> Verdicts.singleHandOut(verdicts, Set.of(), found));
  }

  /**
   * A re-check of deferred runs, a pass's or a takeover's: of its hand-outs, a run another epoch
   * has handed out since the deferral, or holds in a batch to hand out, is skipped, and one another
   * transaction is deciding is deferred again.
   */
  Uni<List<Verdict>> recheck(SqlClient conn, Epoch epoch, List<Verdict> verdicts) {
    return guard(conn, verdicts, ids -> deferrals.handedOutElsewhere(conn, epoch, ids));
  }

  private Uni<List<Verdict>> guard(
      SqlClient conn, List<Verdict> verdicts, Function<List<String>, Uni<Set<String>>> elsewhere) {
    List<String> out =
        Verdicts.of(verdicts, Disposition.HAND_OUT).stream().map(Verdict::runId).toList();
    if (out.isEmpty()) {
      return Uni.createFrom().item(verdicts);
    }
    return conn.preparedQuery(TRY_LOCK)
        .execute(Tuple.of((Object) out.toArray(String[]::new)))
        .chain(
            rows -> {
              Set<String> underWay = new HashSet<>();
              List<String> locked =
                  StreamSupport.stream(rows.spliterator(), false)
                      .filter(
                          r -> {
                            if (!r.getBoolean("locked")) {
                              underWay.add(r.getString("run_id"));
                            }
                            return r.getBoolean("locked");
                          })
                      .map(r -> r.getString("run_id"))
                      .toList();
              return (locked.isEmpty()
                      ? Uni.createFrom().item(Set.<String>of())
                      : elsewhere.apply(locked))
                  .map(found -> Verdicts.singleHandOut(verdicts, underWay, found));
            });
  }

  private static Uni<Set<String>> ids(SqlClient conn, String sql, Epoch epoch, List<String> ids) {
    return conn.preparedQuery(sql)
        .execute(Tuple.of(epoch.namespace(), ids.toArray(String[]::new), epoch.id()))
        .map(
            rows ->
                StreamSupport.stream(rows.spliterator(), false)
                    .map(r -> r.getString("run_id"))
                    .collect(Collectors.toSet()));
  }
}
