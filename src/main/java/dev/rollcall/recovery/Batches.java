package dev.rollcall.recovery;

import dev.rollcall.source.RunSource;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Row;
import io.vertx.mutiny.sqlclient.SqlClient;
import io.vertx.mutiny.sqlclient.Tuple;
import jakarta.enterprise.context.ApplicationScoped;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import org.jboss.logging.Logger;

/**
 * The SQL of batches and of their ledger rows. A batch's runs are fixed when it is cut; its fence
 * goes up by one every time it is leased, and every hand-out writes one ledger row per run under
 * that fence.
 */
@ApplicationScoped
public class Batches {

  private static final Logger LOG = Logger.getLogger(Batches.class);

  /**
   * A batch that may be leased now: a retry batch, a leased one whose lease has expired, or a
   * scanning range whose claimer did not classify it in time.
   */
  record Claimable(long id, String state, int fence, int attempts) {
    boolean scanning() {
      return "scanning".equals(state);
    }

    /** Handed out {@code maxAttempts} times already: given up instead of leased again. */
    boolean exhausted(int maxAttempts) {
      return attempts >= maxAttempts;
    }
  }

  /**
   * A key range of an epoch's scan, leased to one claimer to classify under one fence. {@code
   * retakes}: how often it was taken over from a claimer that did not classify it in time.
   */
  record Range(long id, int fence, List<String> runIds, int retakes) {

    /**
     * Taken over {@code maxAttempts} times without being classified: a poison range, whose runs are
     * handed out unclassified (fail open) so that it cannot hold its epoch open for ever.
     */
    boolean poison(int maxAttempts) {
      return retakes >= maxAttempts;
    }
  }

  /** Who a batch or range is leased to, and for how long (by the database's clock). */
  record Lease(UUID claimer, long ms) {}

  /**
   * Locks the oldest claimable batch of an epoch, skipping batches another claimer is taking right
   * now. Whether a lease has expired is decided by the database's {@code now()}.
   */
  public Uni<Optional<Claimable>> nextClaimable(SqlClient client, long epochId) {
    return client
        .preparedQuery(
            "SELECT id, state, fence, attempts FROM rollcall.batches"
                + " WHERE epoch_id = $1 AND rollcall.is_claimable(state, lease_expires_at)"
                + " ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED")
        .execute(Tuple.of(epochId))
        .map(
            rows -> {
              if (rows.size() == 0) {
                return Optional.empty();
              }
              Row r = rows.iterator().next();
              return Optional.of(
                  new Claimable(
                      r.getLong("id"),
                      r.getString("state"),
                      r.getInteger("fence"),
                      r.getInteger("attempts")));
            });
  }

  /**
   * Gives a claimable batch up: its runs were handed out {@code maxAttempts} times already. The
   * expired hand-outs are marked {@code abandoned} in the ledger, so an operator sees which runs
   * Rollcall stopped trying in this epoch (a later sweep reconsiders them).
   */
  public Uni<Void> abandon(SqlClient client, Claimable batch) {
    return handOutsEnded(client, batch, "abandoned")
        .chain(
            () ->
                client
                    .preparedQuery(
                        "UPDATE rollcall.batches SET state = 'abandoned', completed_at = now()"
                            + " WHERE id = $1 AND fence = $2 AND state IN ('ready', 'leased')")
                    .execute(Tuple.of(batch.id(), batch.fence())))
        .invoke(
            () -> LOG.warnf("batch %d abandoned after %d hand-outs", batch.id(), batch.attempts()))
        .replaceWithVoid();
  }

  /**
   * Leases a locked claimable batch to a claimer under the next fence. The previous holder's
   * hand-outs become {@code lease-expired} in the ledger; its late complete will be refused because
   * its fence is no longer current.
   */
  public Uni<LeasedBatch> relet(
      SqlClient client, RunSource source, Epoch epoch, Claimable batch, Lease lease) {
    // The expired hand-outs take their claimer and lease time from the batch row: written before
    // the row is re-let.
    return handOutsEnded(client, batch, "lease-expired")
        .chain(
            () ->
                client
                    .preparedQuery(
                        "UPDATE rollcall.batches SET state = 'leased', fence = fence + 1,"
                            + " attempts = attempts + 1, claimer_id = $3, leased_at = now(),"
                            + " lease_expires_at = now() + $4::bigint * interval '1 millisecond'"
                            + " WHERE id = $1 AND fence = $2 RETURNING fence, lease_expires_at")
                    .execute(Tuple.of(batch.id(), batch.fence(), lease.claimer(), lease.ms())))
        .chain(
            rows -> {
              Row r = rows.iterator().next();
              int fence = r.getInteger("fence");
              OffsetDateTime expires = r.getOffsetDateTime("lease_expires_at");
              if ("leased".equals(batch.state())) {
                LOG.infof(
                    "batch %d re-leased to instance %s with fence %d (lease of fence %d expired)",
                    batch.id(), lease.claimer(), fence, batch.fence());
              }
              return runsOf(client, source, batch.id())
                  .map(
                      runs ->
                          new LeasedBatch(
                              batch.id(), epoch.id(), epoch.kind(), fence, expires, runs));
            });
  }

  /**
   * Writes the hand-outs of a locked claimable batch under its current fence with this outcome. A
   * ready batch was not handed out under its fence: it has none.
   */
  private static Uni<Void> handOutsEnded(SqlClient client, Claimable batch, String outcome) {
    return "leased".equals(batch.state())
        ? Ledger.outcome(client, batch.id(), batch.fence(), outcome)
        : Uni.createFrom().voidItem();
  }

  /** Cuts a new batch from scanned runs and leases it to the claimer under fence 1. */
  public Uni<LeasedBatch> cut(SqlClient client, Epoch epoch, List<HandedOutRun> runs, Lease lease) {
    return client
        .preparedQuery(
            "INSERT INTO rollcall.batches (epoch_id, state, fence, attempts, claimer_id, leased_at,"
                + " lease_expires_at, run_count)"
                + " VALUES ($1, 'leased', 1, 1, $2, now(),"
                + " now() + $3::bigint * interval '1 millisecond', $4)"
                + " RETURNING id, fence, lease_expires_at")
        .execute(Tuple.of(epoch.id(), lease.claimer(), lease.ms(), runs.size()))
        .chain(
            rows -> {
              Row r = rows.iterator().next();
              return handOut(
                  client,
                  new LeasedBatch(
                      r.getLong("id"),
                      epoch.id(),
                      epoch.kind(),
                      r.getInteger("fence"),
                      r.getOffsetDateTime("lease_expires_at"),
                      runs));
            });
  }

  /**
   * Fixes a new batch's runs: its hand-outs under its fence until their outcome is written ({@link
   * Ledger#OUTCOMES}).
   */
  private static Uni<LeasedBatch> handOut(SqlClient client, LeasedBatch batch) {
    return insertRuns(client, batch.id(), batch.runs()).replaceWith(batch);
  }

  /**
   * Leases a key range the claimer just cut (holding the epoch lock) under fence 1: one row with
   * the range's run ids, so that the range survives the claimer and the lock is held only for this.
   * Classifying it happens after the lock is released ({@link #settleRange}).
   */
  public Uni<Range> cutRange(SqlClient client, Epoch epoch, List<String> runIds, Lease lease) {
    return client
        .preparedQuery(
            "INSERT INTO rollcall.batches (epoch_id, state, fence, attempts, claimer_id, leased_at,"
                + " lease_expires_at, run_count, scan_run_ids)"
                + " VALUES ($1, 'scanning', 1, 0, $2, now(),"
                + " now() + $3::bigint * interval '1 millisecond', $4, $5::text[])"
                + " RETURNING id")
        .execute(
            Tuple.of(
                epoch.id(),
                lease.claimer(),
                lease.ms(),
                runIds.size(),
                runIds.toArray(String[]::new)))
        .map(rows -> new Range(rows.iterator().next().getLong("id"), 1, runIds, 0));
  }

  /**
   * Leases a locked scanning range whose claimer did not classify it in time (it died, say) to
   * another claimer under the next fence; the late claimer's {@link #settleRange} then finds its
   * fence gone and writes nothing. Ranges are never abandoned (their runs were not handed out);
   * each retake is counted in {@code attempts}, and a range retaken too often has its runs handed
   * out without a classification (see {@link RangeClassification}).
   */
  public Uni<Range> retakeRange(SqlClient client, Claimable range, Lease lease) {
    return client
        .preparedQuery(
            "UPDATE rollcall.batches SET fence = fence + 1, attempts = attempts + 1,"
                + " claimer_id = $3, leased_at = now(),"
                + " lease_expires_at = now() + $4::bigint * interval '1 millisecond'"
                + " WHERE id = $1 AND fence = $2 AND state = 'scanning'"
                + " RETURNING fence, scan_run_ids, attempts")
        .execute(Tuple.of(range.id(), range.fence(), lease.claimer(), lease.ms()))
        .map(
            rows -> {
              Row r = rows.iterator().next();
              LOG.infof(
                  "scan range %d re-leased to instance %s with fence %d (lease of fence %d"
                      + " expired before it was classified)",
                  range.id(), lease.claimer(), r.getInteger("fence"), range.fence());
              return new Range(
                  range.id(),
                  r.getInteger("fence"),
                  List.of(r.getArrayOfStrings("scan_run_ids")),
                  r.getInteger("attempts"));
            });
  }

  /**
   * A classified range: the runs to hand out become the range's batch, leased to the claimer; a
   * range that hands out nothing is removed. Guarded by the range's fence, state and lease (by the
   * database's clock), and it locks the row before anything else is written, so a claimer whose
   * lease ran out gets empty and writes nothing.
   */
  public Uni<Optional<Optional<LeasedBatch>>> settleRange(
      SqlClient client, Epoch epoch, Range range, List<HandedOutRun> runs, Lease lease) {
    if (runs.isEmpty()) {
      return client
          .preparedQuery(
              "DELETE FROM rollcall.batches WHERE id = $1 AND fence = $2 AND state = 'scanning'"
                  + " AND claimer_id = $3 AND lease_expires_at > now() RETURNING id")
          .execute(Tuple.of(range.id(), range.fence(), lease.claimer()))
          .map(rows -> rows.size() == 0 ? Optional.empty() : Optional.of(Optional.empty()));
    }
    return client
        .preparedQuery(
            "UPDATE rollcall.batches SET state = 'leased', attempts = 1, run_count = $4,"
                + " scan_run_ids = NULL, leased_at = now(),"
                + " lease_expires_at = now() + $5::bigint * interval '1 millisecond'"
                + " WHERE id = $1 AND fence = $2 AND state = 'scanning' AND claimer_id = $3"
                + " AND lease_expires_at > now() RETURNING lease_expires_at")
        .execute(Tuple.of(range.id(), range.fence(), lease.claimer(), runs.size(), lease.ms()))
        .chain(
            rows -> {
              if (rows.size() == 0) {
                return Uni.createFrom().item(Optional.<Optional<LeasedBatch>>empty());
              }
              OffsetDateTime expires = rows.iterator().next().getOffsetDateTime("lease_expires_at");
              return handOut(
                      client,
                      new LeasedBatch(
                          range.id(), epoch.id(), epoch.kind(), range.fence(), expires, runs))
                  .map(batch -> Optional.of(Optional.of(batch)));
            });
  }

  /**
   * Marks a batch completed under the fence its holder's complete checked (a batch given up while
   * it was leased completes too: its runs were handed out).
   */
  public Uni<Void> complete(SqlClient client, long batchId, int fence) {
    return client
        .preparedQuery(
            "UPDATE rollcall.batches SET state = 'completed', completed_at = now()"
                + " WHERE id = $1 AND fence = $2 AND state IN ('leased', 'abandoned')")
        .execute(Tuple.of(batchId, fence))
        .replaceWithVoid();
  }

  /**
   * A complete's failed runs go into a new ready batch of the same epoch, carrying the attempts so
   * far and everything a hand-out says about each run (its reason and, in a takeover, the dead
   * owner).
   */
  public Uni<Void> retry(
      SqlClient client, long epochId, long batchId, int attempts, String[] failed) {
    return client
        .preparedQuery(
            "WITH retry AS (INSERT INTO rollcall.batches"
                + " (epoch_id, state, fence, attempts, run_count, retry_of)"
                + " VALUES ($1, 'ready', 0, $2, $3, $4) RETURNING id)"
                + " INSERT INTO rollcall.batch_runs (batch_id, run_id, workflow_name, reason,"
                + " dead_instance_id)"
                + " SELECT retry.id, r.run_id, r.workflow_name, r.reason, r.dead_instance_id"
                + " FROM retry, rollcall.batch_runs r"
                + " WHERE r.batch_id = $4 AND r.run_id = ANY($5::text[])")
        .execute(Tuple.of(epochId, attempts, failed.length, batchId, failed))
        .replaceWithVoid();
  }

  /**
   * A batch {@code b} its pass still holds out: a range being classified, or a batch ready or
   * leased. A pass with one is not over ({@link Epochs}), and a close gives them up ({@link
   * #giveUp}). The same states as the partial index batches_claimable, written out so that the
   * planner uses it.
   */
  static final String HELD_OUT = "b.state IN ('scanning', 'ready', 'leased')";

  /**
   * Gives up a closing epoch's ranges being classified and its ready and leased batches, writing
   * the leased ones' hand-outs as {@code abandoned} (ready batches were not handed out under their
   * fence). A range given up is not handed out by the claimer classifying it: its settlement finds
   * it no longer scanning ({@link #settleRange}), and one that settled first is a leased batch
   * here.
   */
  public Uni<Void> giveUp(SqlClient client, long epochId) {
    return client
        .preparedQuery(
            // A batch's state before the update, read from the row it locks (was).
            "WITH was AS (SELECT b.id, b.state FROM rollcall.batches b WHERE b.epoch_id = $1"
                + " AND "
                + HELD_OUT
                + " FOR UPDATE)"
                + " UPDATE rollcall.batches b SET state = 'abandoned', completed_at = now()"
                + " FROM was WHERE b.id = was.id RETURNING b.id, b.fence, was.state")
        .execute(Tuple.of(epochId))
        .chain(
            givenUp ->
                // One ledger statement per leased batch, one after the other.
                Multi.createFrom()
                    .iterable(givenUp)
                    .select()
                    .where(r -> "leased".equals(r.getString("state")))
                    .onItem()
                    .transformToUniAndConcatenate(
                        r ->
                            Ledger.outcome(
                                client, r.getLong("id"), r.getInteger("fence"), "abandoned"))
                    .onItem()
                    .ignoreAsUni());
  }

  /**
   * Ends the leases an instance holds now, because it left or died: the next claim of any peer
   * re-leases those batches under a new fence instead of waiting out the batch lease.
   */
  public Uni<Integer> releaseHeldBy(SqlClient client, UUID instanceId) {
    return client
        .preparedQuery(
            "UPDATE rollcall.batches SET lease_expires_at = now()"
                + " WHERE claimer_id = $1 AND state IN ('scanning', 'leased')"
                + " AND lease_expires_at > now()")
        .execute(Tuple.of(instanceId))
        .map(rows -> rows.rowCount());
  }

  /** Who works the epoch's scan besides {@code claimer} ({@link Scanners}). */
  public Uni<Scanners> scanners(SqlClient client, long epochId, UUID claimer) {
    return client
        .preparedQuery(
            // The partial index batches_claimable holds the epoch's scanning, ready and leased
            // rows.
            "SELECT count(DISTINCT claimer_id) FILTER (WHERE claimer_id <> $2) AS others,"
                + " coalesce(bool_or(claimer_id = $2), false) AS mine,"
                + " coalesce(ceil(extract(epoch FROM (min(lease_expires_at) - now())) * 1000),"
                + " 0)::bigint AS ms"
                + " FROM rollcall.batches WHERE epoch_id = $1"
                + " AND state IN ('scanning', 'leased') AND lease_expires_at > now()")
        .execute(Tuple.of(epochId, claimer))
        .map(
            rows -> {
              Row r = rows.iterator().next();
              return new Scanners(
                  r.getLong("others"), r.getBoolean("mine"), Math.max(0, r.getLong("ms")));
            });
  }

  /** What still holds an epoch open; {@code $2} is the activity fence in milliseconds. */
  public Uni<Outstanding> outstanding(SqlClient client, long epochId, long activityFenceMs) {
    return client
        .preparedQuery(
            "SELECT b.leased, b.ms, d.deferred, d.ms AS deferred_ms FROM"
                + " (SELECT count(*) AS leased, coalesce(ceil(extract(epoch FROM"
                + "   (min(lease_expires_at) - now())) * 1000), 0)::bigint AS ms"
                + "   FROM rollcall.batches WHERE epoch_id = $1"
                + "   AND state IN ('scanning', 'leased')) b,"
                + " (SELECT count(*) AS deferred, coalesce(ceil(extract(epoch FROM"
                + "   (min(deferred_at) + $2::bigint * interval '1 millisecond' - now())) * 1000),"
                + "   0)::bigint AS ms FROM rollcall.deferred WHERE epoch_id = $1) d")
        .execute(Tuple.of(epochId, activityFenceMs))
        .map(
            rows -> {
              Row r = rows.iterator().next();
              return new Outstanding(
                  r.getLong("leased"),
                  Math.max(0, r.getLong("ms")),
                  r.getLong("deferred"),
                  Math.max(0, r.getLong("deferred_ms")));
            });
  }

  /**
   * Cuts ready batches (no claimer yet) of at most {@code size} runs each: the next claims of any
   * instance in the namespace lease them. Takeovers are handed out this way.
   */
  public Uni<Integer> ready(SqlClient client, Epoch epoch, List<HandedOutRun> runs, int size) {
    List<List<HandedOutRun>> parts = new ArrayList<>();
    for (int from = 0; from < runs.size(); from += size) {
      parts.add(runs.subList(from, Math.min(runs.size(), from + size)));
    }
    // A stream, not a chain built in a loop: constant stack depth however many parts.
    return Multi.createFrom()
        .iterable(parts)
        .onItem()
        .transformToUniAndConcatenate(
            part ->
                client
                    .preparedQuery(
                        "INSERT INTO rollcall.batches (epoch_id, state, fence, attempts, run_count)"
                            + " VALUES ($1, 'ready', 0, 0, $2) RETURNING id")
                    .execute(Tuple.of(epoch.id(), part.size()))
                    .chain(rows -> insertRuns(client, rows.iterator().next().getLong("id"), part)))
        .onItem()
        .ignoreAsUni()
        .replaceWith(parts.size());
  }

  private static Uni<Void> insertRuns(SqlClient client, long batchId, List<HandedOutRun> runs) {
    String[] ids = new String[runs.size()];
    String[] names = new String[runs.size()];
    String[] reasons = new String[runs.size()];
    String[] dead = new String[runs.size()];
    String[] messages = new String[runs.size()];
    for (int i = 0; i < runs.size(); i++) {
      HandedOutRun run = runs.get(i);
      ids[i] = run.runId();
      names[i] = run.workflowName();
      reasons[i] = run.reason().wire();
      dead[i] = run.deadInstanceId() == null ? null : run.deadInstanceId().toString();
      messages[i] = run.messageId();
    }
    return client
        .preparedQuery(
            "INSERT INTO rollcall.batch_runs (batch_id, run_id, workflow_name, reason,"
                + " dead_instance_id, message_id)"
                + " SELECT $1, u.run_id, u.workflow_name, u.reason, u.dead::uuid, u.message_id"
                + " FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[])"
                + " AS u(run_id, workflow_name, reason, dead, message_id)")
        .execute(Tuple.of(batchId, ids, names, reasons, dead, messages))
        .replaceWithVoid();
  }

  /** The runs of a batch, as handed out. */
  public Uni<List<HandedOutRun>> runsOf(SqlClient client, RunSource source, long batchId) {
    return client
        .preparedQuery(
            "SELECT run_id, workflow_name, reason, dead_instance_id, message_id"
                + " FROM rollcall.batch_runs"
                + " WHERE batch_id = $1 ORDER BY run_id")
        .execute(Tuple.of(batchId))
        .map(
            rows -> {
              List<HandedOutRun> runs = new ArrayList<>(rows.size());
              for (Row r : rows) {
                String name = r.getString("workflow_name");
                runs.add(
                    new HandedOutRun(
                        r.getString("run_id"),
                        name,
                        source.queueName(name),
                        Reason.fromWire(r.getString("reason")),
                        r.getUUID("dead_instance_id"),
                        r.getString("message_id")));
              }
              return runs;
            });
  }
}
