package dev.rollcall.source;

import dev.rollcall.queue.GraphileQueue;
import dev.rollcall.queue.QueueLocks;
import dev.rollcall.sql.Sql;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.SqlClient;
import io.vertx.mutiny.sqlclient.Tuple;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import org.jboss.logging.Logger;

/**
 * The {@code @workflow/world-postgres} engine: its runs table read like any table, plus the proof
 * its maintainers accept for classifying a run — open steps, due waits, and queued workflow and
 * step jobs in graphile-worker (a hook row is no proof). Every check is one set-based query per
 * page.
 */
public final class WorldPostgresSource implements RunSource {

  private static final Logger LOG = Logger.getLogger(WorldPostgresSource.class);

  private final TableSource runs;
  private final GraphileQueue queue;
  private final String engine;
  private final String jobPrefix;
  private final WorldPostgresTears tears;

  WorldPostgresSource(TableSource runs, GraphileQueue queue, String jobPrefix) {
    this.runs = runs;
    this.queue = queue;
    this.engine = Sql.ident(runs.schema());
    this.jobPrefix = jobPrefix;
    this.tears = new WorldPostgresTears(engine, wakeTasks(), jobPrefix + "steps");
  }

  /** The engine's schema. */
  public String schema() {
    return runs.schema();
  }

  /** The engine's job prefix (part of its graphile task identifiers). */
  public String jobPrefix() {
    return jobPrefix;
  }

  /** True when the runs table tells this namespace's runs apart (newer engine versions). */
  public Uni<Boolean> runsFiltered(SqlClient client) {
    return runs.filtered(client);
  }

  private String workflowTask() {
    return jobPrefix + "flows";
  }

  /**
   * The tasks whose queued jobs wake a run: its workflow messages and its step messages (the 4.x
   * line queues steps on a task of their own; 5.0 queues both on the workflow task). A step
   * message's delivery runs the step, or finds it finished, and then queues the workflow's next
   * message itself.
   */
  private String[] wakeTasks() {
    return new String[] {jobPrefix + "flows", jobPrefix + "steps"};
  }

  @Override
  public boolean classifies() {
    return true;
  }

  @Override
  public Uni<Void> prepareEpoch(SqlClient client, long epochId) {
    // One decode of every queued workflow and step job, kept for the epoch's pages. A failure (no
    // queue schema yet, say) leaves the epoch without queue proof: its runs are re-driven (fail
    // open).
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
                .execute(Tuple.of(epochId, wakeTasks()))
                .replaceWithVoid(),
            e ->
                LOG.warnf(
                    "epoch %d of namespace %s: queued jobs could not be read (%s); no run of this epoch"
                        + " will be skipped for a queued job",
                    epochId, namespace(), e.getMessage()))
        .replaceWithVoid();
  }

  @Override
  public Uni<Map<String, Evidence>> evidence(
      SqlClient client, Long epochId, Collection<String> runIds, Duration activityFence) {
    if (runIds.isEmpty()) {
      return Uni.createFrom().item(Map.of());
    }
    String[] ids = runIds.toArray(String[]::new);
    Uni<Set<String>> openSteps =
        ids(
            client,
            "SELECT DISTINCT run_id FROM "
                + engine
                + ".workflow_steps WHERE run_id = ANY($1::text[])"
                + " AND status IN ('pending', 'running')",
            Tuple.of((Object) ids));
    // A waiting wait due now, or whose resume time cannot be read, needs a wake-up.
    Uni<Set<String>> dueWaits =
        ids(
            client,
            "SELECT DISTINCT run_id FROM "
                + engine
                + ".workflow_waits WHERE run_id = ANY($1::text[]) AND status = 'waiting'"
                + " AND (resume_at IS NULL OR resume_at <= (now() AT TIME ZONE 'UTC'))",
            Tuple.of((Object) ids));
    Uni<Set<String>> recentEvents =
        ids(
            client,
            "SELECT DISTINCT run_id FROM "
                + engine
                + ".workflow_events WHERE run_id = ANY($1::text[])"
                + " AND created_at > ((now() - $2::bigint * interval '1 millisecond')"
                + " AT TIME ZONE 'UTC')",
            Tuple.of(ids, activityFence.toMillis()));
    Uni<Map<String, Boolean>> queued = queuedJobs(client, epochId, ids, activityFence);
    Uni<Map<String, String>> stranded = strandedOwners(client, ids);
    // The latest event of each run, by id (event ids are ULIDs: creation order), read by the
    // run_id index. hook_created last means the replay that created the hook wrote nothing after
    // it: it suspended there, or died before it could go on (then its job is still in the queue).
    Uni<Set<String>> lastHookCreated =
        ids(
            client,
            "SELECT r.run_id FROM unnest($1::text[]) AS r(run_id) WHERE (SELECT e.type FROM "
                + engine
                + ".workflow_events e WHERE e.run_id = r.run_id ORDER BY e.id DESC LIMIT 1)"
                + " = 'hook_created'",
            Tuple.of((Object) ids));
    // The six reads are independent: sent together, they are pipelined on the transaction's
    // connection (one round trip, not six). PostgreSQL still runs them one after another, in this
    // order; if one fails, the rest fail with the transaction and the caller's savepoint is rolled
    // back after all of them.
    return Uni.combine()
        .all()
        .unis(openSteps, dueWaits, recentEvents, queued, stranded, lastHookCreated)
        .collectFailures()
        .asTuple()
        .map(
            t -> {
              Set<String> steps = t.getItem1();
              Set<String> waits = t.getItem2();
              Set<String> recent = t.getItem3();
              Map<String, Boolean> jobs = t.getItem4();
              Map<String, String> owners = t.getItem5();
              Set<String> hooks = t.getItem6();
              Map<String, Evidence> evidence = new HashMap<>();
              for (String id : ids) {
                evidence.put(
                    id,
                    new Evidence(
                        steps.contains(id),
                        waits.contains(id),
                        Boolean.TRUE.equals(jobs.get(id)),
                        recent.contains(id),
                        owners.get(id),
                        hooks.contains(id) && !jobs.containsKey(id)));
              }
              return evidence;
            });
  }

  /**
   * Runs with a step interrupted while inline-owned (the 5.0 engine line): the step is still
   * pending or running, its latest {@code step_started} carries an {@code ownerMessageId} (stored
   * in the event's CBOR data), no {@code step_retrying} ever lapsed that ownership, and no job of
   * that message can run any more: none keyed by it or carrying it in its payload, short of an
   * exhausted one. For such a run the engine re-runs the step only when exactly that message is
   * delivered; every other message schedules a backstop wake-up for the rest of the
   * inline-ownership lease (860 s by default). While the owner's job exists, releasing a dead
   * worker's lock on it is what wakes the run, so the run is not stranded. Reads the run's step
   * events by index, and the namespace's workflow jobs once per page (a hashed semi-join), as
   * {@link #queuedJobs} does without an epoch.
   */
  private Uni<Map<String, String>> strandedOwners(SqlClient client, String[] ids) {
    return owners(
        client,
        " WHERE s.owner IS NOT NULL AND NOT EXISTS (SELECT 1"
            + "   FROM graphile_worker._private_jobs j"
            + "   JOIN graphile_worker._private_tasks t ON t.id = j.task_id"
            + "   WHERE t.identifier = $2 AND j.attempts < j.max_attempts"
            + "   AND (j.key = s.owner OR j.payload ->> 'messageId' = s.owner))",
        Tuple.of(ids, workflowTask()));
  }

  @Override
  public Uni<Map<String, String>> interruptedStepOwners(
      SqlClient client, Collection<String> runIds, Collection<String> ownerMessages) {
    if (runIds.isEmpty() || ownerMessages.isEmpty()) {
      return Uni.createFrom().item(Map.of());
    }
    return owners(
        client,
        " WHERE s.owner = ANY($2::text[])",
        Tuple.of(runIds.toArray(String[]::new), ownerMessages.toArray(String[]::new)));
  }

  /**
   * The owner messages' jobs that can still run (the workflow task's, by the message id in their
   * payload: a hashed semi-join over the namespace's queued jobs, as {@link #strandedOwners} reads
   * them), locked for the statement, and their keys removed. A 5.0 step message's job is keyed by
   * its step: once a dead worker's lock on it is released, a replay on a peer that queues that step
   * again would replace it (graphile's {@code replace} mode), and the owner's message, the only one
   * that re-runs the step before the inline-ownership lease ends, would be gone.
   */
  @Override
  public Uni<Set<String>> keepOwnerJobs(SqlClient client, Collection<String> ownerMessages) {
    if (ownerMessages.isEmpty()) {
      return Uni.createFrom().item(Set.of());
    }
    return client
        .preparedQuery(
            "WITH live AS (SELECT j.id, j.key, j.payload ->> 'messageId' AS owner"
                + "   FROM graphile_worker._private_jobs j"
                + "   JOIN graphile_worker._private_tasks t ON t.id = j.task_id"
                + "   WHERE t.identifier = $2 AND j.attempts < j.max_attempts"
                + "   AND j.payload ->> 'messageId' = ANY($1::text[]) FOR UPDATE OF j),"
                + " unkeyed AS (UPDATE graphile_worker._private_jobs j SET key = NULL FROM live"
                + "   WHERE j.id = live.id AND live.key IS NOT NULL)"
                + " SELECT DISTINCT owner FROM live")
        .execute(Tuple.of(ownerMessages.toArray(String[]::new), workflowTask()))
        .map(
            rows -> {
              Set<String> live = new HashSet<>();
              rows.forEach(r -> live.add(r.getString("owner")));
              return live;
            });
  }

  /**
   * Runs with an interrupted inline-owned step (pending or running, ownership not lapsed by a
   * {@code step_retrying}), one owner message each, among those {@code ownerFilter} keeps; $1 is
   * the run ids. Reads the runs' step events by index.
   */
  private Uni<Map<String, String>> owners(SqlClient client, String ownerFilter, Tuple params) {
    return client
        .preparedQuery(
            "SELECT s.run_id, min(s.owner) AS owner FROM ("
                + "  SELECT DISTINCT ON (e.run_id, e.correlation_id) e.run_id,"
                + "    rollcall.cbor_text(e.payload_cbor, 'ownerMessageId') AS owner"
                + "  FROM "
                + engine
                + ".workflow_events e JOIN "
                + engine
                + ".workflow_steps st ON st.step_id = e.correlation_id AND st.run_id = e.run_id"
                + "  WHERE e.run_id = ANY($1::text[]) AND e.type = 'step_started'"
                + "  AND st.status IN ('pending', 'running')"
                + "  AND NOT EXISTS (SELECT 1 FROM "
                + engine
                + ".workflow_events r WHERE r.run_id = e.run_id"
                + "    AND r.correlation_id = e.correlation_id AND r.type = 'step_retrying')"
                + "  ORDER BY e.run_id, e.correlation_id, e.id DESC) s"
                + ownerFilter
                + " GROUP BY s.run_id")
        .execute(params)
        .map(
            rows -> {
              Map<String, String> owners = new HashMap<>();
              rows.forEach(r -> owners.put(r.getString("run_id"), r.getString("owner")));
              return owners;
            });
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
                ids,
                namespace(),
                epochId != null ? epochId : wakeTasks(),
                activityFence.toMillis()))
        .map(
            rows -> {
              Map<String, Boolean> jobs = new HashMap<>();
              rows.forEach(r -> jobs.put(r.getString("run_id"), r.getBoolean("live")));
              return jobs;
            });
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
    String live =
        "bool_or(j.attempts < j.max_attempts AND ((j.locked_by IS NULL AND (j.key IS NULL"
            + " OR j.key NOT LIKE '%:backstop:%' OR j.run_at <= now()))"
            + " OR j.locked_by IN ("
            + GraphileQueue.unendedWorkers("$2")
            + ") OR (j.key IS NOT NULL"
            + " AND j.locked_at > now() - $4::bigint * interval '1 millisecond'))) AS live";
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

  @Override
  public boolean tearsWrites() {
    return true;
  }

  @Override
  public Uni<List<Mend>> mendTorn(SqlClient client, Collection<String> runIds) {
    return tears.mend(client, runIds);
  }

  @Override
  public Uni<List<Mend>> mendTornIfQuiet(
      SqlClient client, Collection<String> runIds, Duration quiet) {
    if (runIds.isEmpty()) {
      return Uni.createFrom().item(List.of());
    }
    return ids(
            client,
            "SELECT u.run_id FROM unnest($1::text[]) AS u(run_id) WHERE NOT EXISTS (SELECT 1 FROM "
                + engine
                + ".workflow_events e WHERE e.run_id = u.run_id"
                + " AND e.created_at > ((now() - $2::bigint * interval '1 millisecond')"
                + " AT TIME ZONE 'UTC'))",
            Tuple.of(runIds.toArray(String[]::new), quiet.toMillis()))
        .chain(quietRuns -> tears.mend(client, quietRuns));
  }

  @Override
  public Uni<java.util.Set<String>> tornIn(SqlClient client, Collection<String> runIds) {
    return tears.tornIn(client, runIds);
  }

  @Override
  public Uni<List<Mend>> mendTornUndelivered(
      SqlClient client, Collection<String> runIds, DeadDeliveries deliveries) {
    return tears.mendUndelivered(client, runIds, deliveries);
  }

  @Override
  public Uni<Set<String>> unchangedSince(SqlClient client, Map<String, OffsetDateTime> redriven) {
    if (redriven.isEmpty()) {
      return Uni.createFrom().item(Set.of());
    }
    List<String> ids = new ArrayList<>(redriven.keySet());
    OffsetDateTime[] times = ids.stream().map(redriven::get).toArray(OffsetDateTime[]::new);
    return ids(
        client,
        "SELECT u.run_id FROM unnest($1::text[], $2::timestamptz[]) AS u(run_id, t)"
            + " WHERE NOT EXISTS (SELECT 1 FROM "
            + engine
            + ".workflow_events e WHERE e.run_id = u.run_id"
            + " AND (e.created_at AT TIME ZONE 'UTC') > u.t)",
        Tuple.of(ids.toArray(String[]::new), times));
  }

  private static Uni<Set<String>> ids(SqlClient client, String sql, Tuple params) {
    return client
        .preparedQuery(sql)
        .execute(params)
        .map(
            rows -> {
              Set<String> found = new HashSet<>();
              rows.forEach(r -> found.add(r.getString("run_id")));
              return found;
            });
  }

  // Everything else is the runs table's.

  @Override
  public String namespace() {
    return runs.namespace();
  }

  @Override
  public String describe() {
    return runs.describe();
  }

  @Override
  public String queueName(String workflowName) {
    return runs.queueName(workflowName);
  }

  @Override
  public boolean isPending(ScannedRun run) {
    return runs.isPending(run);
  }

  @Override
  public List<String> activeStatuses() {
    return runs.activeStatuses();
  }

  @Override
  public Optional<QueueLocks> queue() {
    return Optional.of(queue);
  }

  @Override
  public Optional<String> activeIndexDdl() {
    return runs.activeIndexDdl();
  }

  @Override
  public Uni<Snapshot> snapshot(SqlClient client) {
    return runs.snapshot(client);
  }

  @Override
  public Uni<List<ScannedRun>> page(
      SqlClient client,
      Snapshot snapshot,
      Optional<String> after,
      int limit,
      Duration activityFence) {
    return runs.page(client, snapshot, after, limit, activityFence);
  }

  @Override
  public Uni<List<ScannedRun>> pageAfterEpochCursor(
      SqlClient client, Snapshot snapshot, long epochId, int limit, Duration activityFence) {
    return runs.pageAfterEpochCursor(client, snapshot, epochId, limit, activityFence);
  }

  @Override
  public Uni<Map<String, ScannedRun>> lookup(
      SqlClient client, Collection<String> runIds, Duration activityFence) {
    return runs.lookup(client, runIds, activityFence);
  }

  @Override
  public Uni<Void> probe(SqlClient client) {
    return runs.probe(client)
        .chain(
            () ->
                client
                    .query("SELECT run_id, status FROM " + engine + ".workflow_steps LIMIT 0")
                    .execute())
        .chain(
            () ->
                client
                    .query(
                        "SELECT run_id, status, resume_at FROM "
                            + engine
                            + ".workflow_waits LIMIT 0")
                    .execute())
        .replaceWithVoid();
  }
}
