package dev.rollcall.source;

import dev.rollcall.queue.GraphileQueue;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.SqlClient;
import io.vertx.mutiny.sqlclient.Tuple;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;
import org.jboss.logging.Logger;

/**
 * The engine's queue as proof that a run will wake (the decision table's row 4): its workflow and
 * step jobs in graphile-worker that can still run, by run. A takeover reads them straight from the
 * queue; a pass decodes the queue once when it opens and probes that decode by run, with the jobs
 * the engine queued since for the runs it wrote to since. One home for these statements, which
 * {@link WorldPostgresSource} serves.
 */
public final class WakeJobs {

  private static final Logger LOG = Logger.getLogger(WakeJobs.class);

  /** The engine's schema, quoted. */
  private final String engine;

  private final String namespace;

  /** The tasks whose jobs wake a run (workflow and step messages). */
  private final String[] wakeTasks;

  WakeJobs(String engine, String namespace, String[] wakeTasks) {
    this.engine = engine;
    this.namespace = namespace;
    this.wakeTasks = wakeTasks;
  }

  /**
   * The runs among {@code ids} with a job, each with whether one can wake it now: for a takeover
   * ({@code epochId} null) straight from the queue, for an epoch from its decode and the jobs since
   * ({@link #laterJobs}).
   */
  Uni<Map<String, Boolean>> wakeJobs(
      SqlClient client, Long epochId, String[] ids, Duration activityFence) {
    return epochId == null
        ? queuedJobs(client, null, ids, activityFence)
        : queuedJobs(client, epochId, ids, activityFence)
            .chain(decoded -> laterJobs(client, epochId, ids, activityFence, decoded));
  }

  /**
   * How long a queue job's transaction may stay open after the job's creation, for an epoch's
   * decode of the queue: the decode answers for the jobs created this long before it ({@code
   * rollcall.epochs.wake_jobs_through}), and a run the engine wrote to since this long before the
   * epoch opened is classified with the jobs above that too ({@link #laterJobs}). The engine and
   * Rollcall's client add each job in a short transaction of its own.
   */
  static final String DECODE_MARGIN = "interval '1 minute'";

  /**
   * Decodes every queued workflow and step job once for epoch {@code epochId}, in the transaction
   * that opens it, and returns the last job the decode answers for (the epoch's {@code
   * wake_jobs_through}, which {@code recovery.Epochs} records): empty when the queue could not be
   * read.
   */
  Uni<Optional<Long>> decode(SqlClient client, long epochId) {
    // One decode of every queued workflow and step job, kept for the epoch's pages, and the last
    // job it answers for. A failure (no queue schema yet, say) leaves the epoch without queue
    // proof: its runs are re-driven (fail open).
    return Savepoints.attempt(
        client,
        "prepare_epoch",
        client
            .preparedQuery(
                "INSERT INTO rollcall.epoch_wake_jobs (epoch_id, run_id, job_id)"
                    + " SELECT DISTINCT $1::bigint, w.run_id, w.job_id FROM ("
                    + "   SELECT rollcall.engine_job_run_id(j.payload) AS run_id, j.id AS job_id"
                    + "   FROM graphile_worker._private_jobs j"
                    + "   JOIN graphile_worker._private_tasks t ON t.id = j.task_id"
                    + "   WHERE t.identifier = ANY($2::text[]) AND j.attempts < j.max_attempts) w"
                    + " WHERE w.run_id IS NOT NULL")
            .execute(Tuple.of(epochId, wakeTasks))
            .chain(
                () ->
                    client
                        .preparedQuery(
                            "SELECT coalesce(max(j.id), 0) AS through"
                                + " FROM graphile_worker._private_jobs j"
                                + " WHERE j.created_at < now() - "
                                + DECODE_MARGIN)
                        .execute())
            .map(rows -> rows.iterator().next().getLong("through")),
        e ->
            LOG.warnf(
                "epoch %d of namespace %s: queued jobs could not be read (%s); no run of this epoch"
                    + " will be skipped for a queued job",
                epochId, namespace, e.getMessage()));
  }

  /**
   * Deletes what a closed epoch no longer needs: its decoded queue evidence (one row per queued
   * workflow job when it opened). Retention deletes it with the epoch, should this not have run.
   */
  public static Uni<Void> forget(SqlClient client, long epochId) {
    return client
        .preparedQuery("DELETE FROM rollcall.epoch_wake_jobs WHERE epoch_id = $1")
        .execute(Tuple.of(epochId))
        .replaceWithVoid();
  }

  /**
   * Runs with a queued workflow or step job that will wake them: not exhausted, and unlocked or
   * locked by a worker a live instance of this namespace owns, registered or learned (a dead
   * worker's lock proves nothing). With an epoch, from the jobs decoded when it opened; without
   * one, straight from the queue.
   */
  private Uni<Map<String, Boolean>> queuedJobs(
      SqlClient client, Long epochId, String[] ids, Duration activityFence) {
    return client
        .preparedQuery(queuedJobsSql(epochId != null))
        .execute(
            Tuple.of(
                ids, namespace, epochId != null ? epochId : wakeTasks, activityFence.toMillis()))
        .map(
            rows -> {
              Map<String, Boolean> jobs = new HashMap<>();
              rows.forEach(r -> jobs.put(r.getString("run_id"), r.getBoolean("live")));
              return jobs;
            });
  }

  /**
   * An epoch's decoded jobs ({@code decoded}) with, for the runs the engine has written to since it
   * opened (its decode, less {@link #DECODE_MARGIN}), the queue's jobs above the decode's last one
   * as well: the engine queues a run's next message as it moves it on (a sleep's wake-up, the
   * message after a step), and an epoch's first look or re-check late in a long pass would
   * otherwise take a run the engine has just given a job to for one with no wake path, and hand it
   * out beside that job. A run nobody wrote to since has no job from the engine the decode missed.
   * Read by job id from the decode's last one up (the primary key), only when such runs exist.
   */
  private Uni<Map<String, Boolean>> laterJobs(
      SqlClient client,
      long epochId,
      String[] ids,
      Duration activityFence,
      Map<String, Boolean> decoded) {
    // A run one of whose decoded jobs can wake it is skipped whatever came since.
    String[] open =
        Arrays.stream(ids)
            .filter(id -> !Boolean.TRUE.equals(decoded.get(id)))
            .toArray(String[]::new);
    if (open.length == 0) {
      return Uni.createFrom().item(decoded);
    }
    return WorldPostgresSource.ids(
            client,
            "SELECT r.run_id FROM unnest($1::text[]) AS r(run_id) WHERE EXISTS (SELECT 1 FROM "
                + engine
                + ".workflow_events e WHERE e.run_id = r.run_id"
                + " AND e.created_at > ((SELECT snapshot_at - "
                + DECODE_MARGIN
                + " FROM rollcall.epochs WHERE id = $2) AT TIME ZONE 'UTC'))",
            Tuple.of(open, epochId))
        .chain(
            written ->
                written.isEmpty()
                    ? Uni.createFrom().item(decoded)
                    : client
                        .preparedQuery(laterJobsSql())
                        .execute(
                            Tuple.of(
                                written.toArray(String[]::new),
                                namespace,
                                epochId,
                                activityFence.toMillis(),
                                wakeTasks))
                        .map(
                            rows -> {
                              Map<String, Boolean> jobs = new HashMap<>(decoded);
                              rows.forEach(
                                  r ->
                                      jobs.merge(
                                          r.getString("run_id"),
                                          r.getBoolean("live"),
                                          Boolean::logicalOr));
                              return jobs;
                            }));
  }

  /**
   * The statement of {@link #laterJobs}: the jobs of runs $1 above epoch $3's decode, each run with
   * whether one can wake it ({@link #queuedJobsSql}'s rule); $2 the namespace, $4 the activity
   * fence in ms, $5 the wake tasks. An epoch without a decode reads none.
   */
  String laterJobsSql() {
    return "SELECT rollcall.engine_job_run_id(j.payload) AS run_id, "
        + liveJob()
        + " FROM graphile_worker._private_jobs j"
        + " JOIN graphile_worker._private_tasks t ON t.id = j.task_id"
        + " WHERE j.id > (SELECT wake_jobs_through FROM rollcall.epochs WHERE id = $3)"
        + " AND t.identifier = ANY($5::text[])"
        + " AND rollcall.engine_job_run_id(j.payload) = ANY($1::text[])"
        + " GROUP BY 1";
  }

  /**
   * The statement of {@link #queuedJobs}: $1 the run ids, $2 the namespace, $3 the epoch (or the
   * workflow task without one), $4 the activity fence in ms.
   */
  String queuedJobsSql(boolean withEpoch) {
    // Every job of the page's runs, each with whether it can wake its run now; a run absent from
    // the answer has no job at all (the parked-on-hook proof needs that). A keyed job locked within
    // the activity fence counts too, whoever locked it: a live process reports the message it
    // executes within the fence (then its worker is learned), and a dead one's lock is released
    // as an orphan once it is older (GraphileQueue.releaseOrphanedLocks). Without this, a peer
    // that had just picked up a run (the owner's message, released a moment ago) would see the
    // run re-driven beside it. A job locked by a worker of an instance whose lease ran out but
    // that is not declared dead yet counts as well: its takeover releases that lock, and the queue
    // delivers the job. Instances that die together (app replicas that exit with their database)
    // are declared dead in transactions of their own, at the same moment: without this, one's
    // takeover would re-drive a run whose job another's is releasing, two replays at once.
    //
    // A delayed backstop (the 5.0 runtime's wake-up at the end of a step's 860 s inline-ownership
    // lease, keyed <stepId>:backstop:<startedAt>) is no wake path until it is due: the run would
    // wait out the lease, the very delay recovery removes. Once due, or under a delivery, it is.
    String live = liveJob();
    return withEpoch
        // Probes, by index, the page's runs in the epoch's decoded jobs and each job by its
        // id. OFFSET 0 keeps each lateral subquery a probe: joined flat, the planner may
        // hash the whole jobs table for every page, and that table holds every job the pass
        // itself adds (a scan of 100 000 jobs and more per page, late in a large pass).
        ? "SELECT u.run_id, "
            + live
            + " FROM unnest($1::text[]) AS u(run_id)"
            + " JOIN LATERAL (SELECT w.job_id FROM rollcall.epoch_wake_jobs w"
            + "   WHERE w.epoch_id = $3 AND w.run_id = u.run_id OFFSET 0) w ON true"
            + " JOIN LATERAL (SELECT j.attempts, j.max_attempts, j.locked_by, j.locked_at,"
            + "   j.key, j.run_at FROM graphile_worker._private_jobs j WHERE j.id = w.job_id"
            + "   OFFSET 0) j"
            + "   ON true"
            + " GROUP BY u.run_id"
        : "SELECT rollcall.engine_job_run_id(j.payload) AS run_id, "
            + live
            + " FROM graphile_worker._private_jobs j"
            + " JOIN graphile_worker._private_tasks t ON t.id = j.task_id"
            + " WHERE t.identifier = ANY($3::text[])"
            + " AND rollcall.engine_job_run_id(j.payload) = ANY($1::text[])"
            + " GROUP BY 1";
  }

  /**
   * Whether one of the group's jobs {@code j} can wake its run ({@link #queuedJobsSql}'s comment):
   * $2 is the namespace, $4 the activity fence in ms.
   */
  private static String liveJob() {
    return "bool_or(j.attempts < j.max_attempts AND ((j.locked_by IS NULL AND (j.key IS NULL"
        + " OR j.key NOT LIKE '%:backstop:%' OR j.run_at <= now()))"
        + " OR j.locked_by IN ("
        + GraphileQueue.unendedWorkers("$2")
        + ") OR (j.key IS NOT NULL"
        + " AND j.locked_at > now() - $4::bigint * interval '1 millisecond'))) AS live";
  }
}
