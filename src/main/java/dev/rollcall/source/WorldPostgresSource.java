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

/**
 * The {@code @workflow/world-postgres} engine: its runs table read like any table, plus the proof
 * its maintainers accept for classifying a run — open steps, due waits, and queued workflow and
 * step jobs in graphile-worker (a hook row is no proof). Every check is one set-based query per
 * page.
 */
public final class WorldPostgresSource implements RunSource {

  private final TableSource runs;
  private final GraphileQueue queue;
  private final String engine;
  private final String jobPrefix;
  private final WorldPostgresTears tears;
  private final InlineOwners inlineOwners;
  private final WakeJobs jobs;

  WorldPostgresSource(TableSource runs, GraphileQueue queue, String jobPrefix) {
    this.runs = runs;
    this.queue = queue;
    this.engine = Sql.ident(runs.schema());
    this.jobPrefix = jobPrefix;
    this.tears = new WorldPostgresTears(engine, wakeTasks(), jobPrefix + "steps");
    this.inlineOwners = new InlineOwners(engine, workflowTask());
    this.jobs = new WakeJobs(engine, runs.namespace(), wakeTasks());
  }

  /** The engine's schema. */
  public String schema() {
    return runs.schema();
  }

  /** The statement of the queue proof ({@link WakeJobs#queuedJobsSql}). */
  String queuedJobsSql(boolean withEpoch) {
    return jobs.queuedJobsSql(withEpoch);
  }

  /** The statement of the later jobs' read ({@link WakeJobs#laterJobsSql}). */
  String laterJobsSql() {
    return jobs.laterJobsSql();
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
  public Uni<Optional<Long>> prepareEpoch(SqlClient client, long epochId) {
    return jobs.decode(client, epochId);
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
    Uni<Map<String, Boolean>> queued = jobs.wakeJobs(client, epochId, ids, activityFence);
    Uni<Map<String, String>> stranded = inlineOwners.stranded(client, ids);
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
    // connection (one round trip, not six; an epoch's queue read may take two more after it).
    // PostgreSQL still runs them one after another, in this order; if one fails, the rest fail
    // with the transaction and the caller's savepoint is rolled back after all of them.
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

  @Override
  public Uni<Map<String, String>> interruptedStepOwners(
      SqlClient client, Collection<String> runIds, Collection<String> ownerMessages) {
    return inlineOwners.interrupted(client, runIds, ownerMessages);
  }

  @Override
  public Uni<Set<String>> keepOwnerJobs(SqlClient client, Collection<String> ownerMessages) {
    return inlineOwners.keepJobs(client, ownerMessages);
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

  /** The first column of {@code sql}'s rows, as run ids. */
  static Uni<Set<String>> ids(SqlClient client, String sql, Tuple params) {
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
