package dev.rollcall.queue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.rollcall.sql.Liveness;
import dev.rollcall.sql.Sql;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Row;
import io.vertx.mutiny.sqlclient.SqlClient;
import io.vertx.mutiny.sqlclient.Tuple;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.UUID;
import java.util.function.Supplier;
import org.jboss.logging.Logger;

/**
 * A graphile-worker queue (0.16 layout: {@code _private_jobs}, {@code _private_tasks}, {@code
 * _private_job_queues}). Releasing a dead worker's locks is what {@code force_unlock_workers} does,
 * scoped to this namespace's task identifiers, because several applications may share one queue
 * schema. Only the lock columns change: payload, attempts, key and {@code run_at} stay as they
 * were.
 *
 * <p>Which worker is whose is learned from the queue: an instance reports the message id of each
 * execution, the engine keys each job by its message id (or by its idempotency key, with the
 * message id in the payload), and the job's {@code locked_by} is the worker executing it.
 */
public final class GraphileQueue implements QueueLocks {

  private static final Logger LOG = Logger.getLogger(GraphileQueue.class);
  private static final ObjectMapper JSON = new ObjectMapper();

  /**
   * The queue workers live instances of namespace {@code $ns} own up to: registered or learned.
   * Liveness is decided here, by the statement's own {@code now()}.
   */
  public static String liveWorkers(String ns) {
    return "SELECT unnest(i.worker_ids) FROM rollcall.instances i WHERE i.namespace = "
        + ns
        + " AND rollcall.is_live(i.state, i.lease_expires_at)"
        + " UNION ALL SELECT w.worker_id FROM rollcall.queue_workers w"
        + " JOIN rollcall.instances i ON i.id = w.instance_id WHERE w.namespace = "
        + ns
        + " AND rollcall.is_live(i.state, i.lease_expires_at)";
  }

  /**
   * A query for the queue workers of namespace {@code $ns}'s instances that have not ended: live,
   * or with a lease run out but not yet declared dead (perhaps being declared so right now, in a
   * transaction not yet committed). A job such a worker holds is under way or about to be released
   * by its instance's takeover; either way the queue delivers it.
   */
  public static String unendedWorkers(String ns) {
    return "SELECT unnest(i.worker_ids) FROM rollcall.instances i WHERE i.namespace = "
        + ns
        + " AND i.state = 'live'"
        + " UNION ALL SELECT w.worker_id FROM rollcall.queue_workers w"
        + " JOIN rollcall.instances i ON i.id = w.instance_id WHERE w.namespace = "
        + ns
        + " AND i.state = 'live'";
  }

  /** True when a live instance of namespace {@code $ns} reports executing job {@code j}. */
  private static String reportedLive(String ns) {
    return reportedBy(ns, Liveness.liveById("i."));
  }

  /**
   * True when an instance of namespace {@code $ns} that meets {@code instance} (a condition on
   * {@code i}) reports executing job {@code j}.
   */
  private static String reportedBy(String ns, String instance) {
    return "EXISTS (SELECT 1 FROM rollcall.ownership_messages m"
        + " JOIN rollcall.instances i ON i.id = m.instance_id WHERE m.namespace = "
        + ns
        + " AND m.message_id IN (j.key, j.payload ->> 'messageId') AND "
        + instance
        + ")";
  }

  private final String namespace;
  private final String schemaName;
  private final String schema;
  private final List<String> taskIdentifiers;

  /**
   * @param namespace the Rollcall namespace whose instances consume this queue
   * @param schema the queue's schema, usually {@code graphile_worker}
   * @param taskIdentifiers this namespace's task identifiers, e.g. {@code workflow_flows}
   */
  public GraphileQueue(String namespace, String schema, List<String> taskIdentifiers) {
    this.namespace = namespace;
    this.schemaName = schema;
    this.schema = Sql.ident(schema);
    this.taskIdentifiers = List.copyOf(taskIdentifiers);
  }

  /** The task identifiers whose jobs this namespace owns. */
  public List<String> taskIdentifiers() {
    return taskIdentifiers;
  }

  /**
   * One probe of the unique index on {@code key} per message, and of the tasks' primary key: the
   * cost grows with the reported messages only, never with the queue. One statement for every
   * instance of a heartbeat flush, run after its transaction (see {@code Heartbeats}), so no
   * instance row is locked meanwhile. The first instance to show a worker keeps it: a worker
   * learned before is not touched, and of the instances of one statement the first reported wins. A
   * message whose job is keyed by an idempotency key is not found here, and its worker is learned
   * when the instance dies ({@link #releaseLocksOf}).
   */
  @Override
  public Uni<Learned> learnWorkers(SqlClient client, List<Reported> reported) {
    if (reported.isEmpty()) {
      return Uni.createFrom().item(new Learned(0, List.of()));
    }
    // Rows go in in worker order (DISTINCT ON sorts by it): two of these statements that insert
    // the same new workers at once wait for one another in that one order, never in a cycle.
    return client
        .preparedQuery(
            "WITH found AS (SELECT r.instance_id, r.key, r.n, j.locked_by, j.id FROM "
                + schema
                + "._private_jobs j JOIN "
                + schema
                + "._private_tasks t ON t.id = j.task_id"
                + " JOIN unnest($2::uuid[], $3::text[]) WITH ORDINALITY AS r(instance_id, key, n)"
                + " ON r.key = j.key"
                // The array probes the unique index on key, whatever the planner makes of unnest.
                + " WHERE j.key = ANY($3::text[]) AND j.locked_by IS NOT NULL"
                + " AND t.identifier = ANY($4::text[])),"
                + " learned AS (INSERT INTO rollcall.queue_workers"
                + " (namespace, worker_id, instance_id, message_id)"
                + " SELECT DISTINCT ON (f.locked_by) $1, f.locked_by, f.instance_id, f.key"
                + " FROM found f ORDER BY f.locked_by, f.n, f.id ON CONFLICT DO NOTHING"
                + " RETURNING 1)"
                + " SELECT f.instance_id, f.key, (SELECT count(*) FROM learned) AS learned"
                + " FROM found f")
        .execute(
            Tuple.of(
                namespace,
                reported.stream().map(Reported::instanceId).toArray(UUID[]::new),
                reported.stream().map(Reported::messageId).toArray(String[]::new),
                taskIdentifiers.toArray(String[]::new)))
        .map(
            rows -> {
              List<Reported> found = new ArrayList<>();
              long learned = 0;
              for (Row row : rows) {
                found.add(new Reported(row.getUUID("instance_id"), row.getString("key")));
                learned = row.getLong("learned");
              }
              return new Learned((int) learned, found);
            });
  }

  @Override
  public Uni<List<ReleasedLock>> releaseLocksOf(
      SqlClient client, UUID instanceId, List<String> registeredWorkerIds) {
    return ifKnown(
        client,
        "locks of instance " + instanceId + " are left for graphile-worker's own 4-hour expiry",
        () ->
            learnAtDeath(client, instanceId)
                .chain(() -> release(client, instanceId, registeredWorkerIds)));
  }

  /**
   * The workers holding the jobs of the messages the instance last reported, locked no later than
   * it first reported them: that lock existed while the instance was executing the message, so it
   * is the instance's. Matches the job's key and the message id in its payload (jobs keyed by an
   * idempotency key), so it reads the namespace's locked jobs once: a takeover, not a heartbeat.
   */
  private Uni<Void> learnAtDeath(SqlClient client, UUID instanceId) {
    return client
        .preparedQuery(learnAtDeathSql())
        .execute(Tuple.of(instanceId, namespace, taskIdentifiers.toArray(String[]::new)))
        .replaceWithVoid();
  }

  /** The statement of {@link #learnAtDeath}: $1 the instance, $2 the namespace, $3 the tasks. */
  String learnAtDeathSql() {
    return "INSERT INTO rollcall.queue_workers (namespace, worker_id, instance_id, message_id)"
        + " SELECT DISTINCT ON (j.locked_by) $2, j.locked_by, $1, m.message_id"
        + " FROM rollcall.ownership_messages m, "
        + schema
        + "._private_jobs j JOIN "
        + schema
        + "._private_tasks t ON t.id = j.task_id"
        + " WHERE m.instance_id = $1 AND j.locked_by IS NOT NULL"
        // Uncorrelated, so PostgreSQL checks it once before reading any job (a one-time
        // filter): an instance that reported no message costs no read of the queue.
        + " AND EXISTS (SELECT 1 FROM rollcall.ownership_messages m0"
        + "   WHERE m0.instance_id = $1)"
        + " AND m.message_id IN (j.key, j.payload ->> 'messageId')"
        + " AND j.locked_at <= m.reported_at AND t.identifier = ANY($3::text[])"
        + " ORDER BY j.locked_by, j.id ON CONFLICT DO NOTHING";
  }

  /**
   * The release of one instance's locks. Races: rows are locked before their lock columns change,
   * so two service replicas (or a graphile worker completing the job) serialize on each job; the
   * loser re-reads the row and finds it no longer locked by the worker, and releases nothing.
   */
  private Uni<List<ReleasedLock>> release(
      SqlClient client, UUID instanceId, List<String> registeredWorkerIds) {
    return unlock(
        client,
        releaseTargetSql(),
        Tuple.of(
            registeredWorkerIds.toArray(String[]::new),
            taskIdentifiers.toArray(String[]::new),
            instanceId,
            namespace));
  }

  /**
   * The jobs {@link #release} unlocks: $1 the worker ids the instance named, $2 the tasks, $3 the
   * instance, $4 the namespace.
   */
  String releaseTargetSql() {
    return "SELECT j.id, j.locked_by, j.locked_at, t.identifier, j.job_queue_id, j.key,"
        + "   j.payload::text AS payload, $3::uuid AS owner_id,"
        + "   CASE WHEN j.locked_by = ANY($1::text[]) THEN 'named by instance ' || $3::uuid"
        + "   ELSE 'learned for instance ' || $3::uuid || ' from message ' || w.message_id"
        + "   || ' at ' || w.learned_at END AS proof"
        + " FROM "
        + schema
        + "._private_jobs j JOIN "
        + schema
        + "._private_tasks t ON t.id = j.task_id"
        + " LEFT JOIN rollcall.queue_workers w ON w.namespace = $4 AND w.worker_id = j.locked_by"
        + "   AND w.instance_id = $3::uuid"
        + " WHERE (j.locked_by = ANY($1::text[]) OR w.worker_id IS NOT NULL)"
        // Uncorrelated, so checked once before reading any job (a one-time filter): an
        // instance that named no worker and had none learned costs no read of the queue, which
        // may hold every job of a deploy's recovery.
        + " AND (cardinality($1::text[]) > 0 OR EXISTS (SELECT 1 FROM rollcall.queue_workers w0"
        + "   WHERE w0.namespace = $4 AND w0.instance_id = $3::uuid))"
        + " AND t.identifier = ANY($2::text[])"
        + " AND j.locked_by NOT IN (SELECT lw.worker_id FROM ("
        + liveWorkers("$4")
        + ") AS lw(worker_id) WHERE lw.worker_id IS NOT NULL)"
        + " AND NOT "
        + reportedLive("$4")
        + " FOR UPDATE OF j";
  }

  /**
   * Orphans: locks that no instance owns up to, older than the fence by the database's clock, on
   * keyed jobs (every engine job has a key, and a live executor reports its message within the
   * fence). An instance whose lease ran out but that is not declared dead yet still owns up to its
   * workers' locks and the runs it reported: its takeover releases them, in the transaction that
   * mends the writes its death tore, before the queue can deliver a torn run to a live replica
   * (which would replay it in a loop the mend then has to wait out). Rows another transaction has
   * locked are skipped, so concurrent passes of several service replicas release each lock once.
   */
  @Override
  public Uni<List<ReleasedLock>> releaseOrphanedLocks(SqlClient client, Duration fence) {
    return ifKnown(
        client,
        "orphaned locks are left for graphile-worker's own 4-hour expiry",
        () ->
            unlock(
                client,
                "SELECT j.id, j.locked_by, j.locked_at, t.identifier, j.job_queue_id, j.key,"
                    + "   j.payload::text AS payload, w.instance_id AS owner_id,"
                    + "   'orphaned: worker ' || j.locked_by || ' locked the job at ' || j.locked_at"
                    + "   || ', more than ' || $3::bigint || ' ms ago, no instance owns the worker'"
                    + "   || coalesce(' (it was instance ' || w.instance_id || '''s, learned from'"
                    + "   || ' message ' || w.message_id || ')', '')"
                    + "   || ' and none reports executing its message or its run' AS proof"
                    + " FROM "
                    + schema
                    + "._private_jobs j JOIN "
                    + schema
                    + "._private_tasks t ON t.id = j.task_id"
                    + " LEFT JOIN rollcall.queue_workers w ON w.namespace = $1"
                    + "   AND w.worker_id = j.locked_by"
                    + " WHERE j.locked_by IS NOT NULL AND j.key IS NOT NULL"
                    + " AND t.identifier = ANY($2::text[])"
                    + " AND j.locked_at < now() - $3::bigint * interval '1 millisecond'"
                    + " AND j.locked_by NOT IN (SELECT lw.worker_id FROM ("
                    + unendedWorkers("$1")
                    + ") AS lw(worker_id) WHERE lw.worker_id IS NOT NULL)"
                    + " AND NOT "
                    + reportedBy("$1", "i.state = 'live'")
                    // An instance that reports a run without its message ids (an older client,
                    // or a message it could not tell) may be executing this very job.
                    + " AND NOT EXISTS (SELECT 1 FROM rollcall.ownership o"
                    + "   JOIN rollcall.instances i ON i.id = o.instance_id WHERE o.namespace = $1"
                    + "   AND o.run_id = rollcall.engine_job_run_id(j.payload)"
                    + "   AND i.state = 'live')"
                    + " FOR UPDATE OF j SKIP LOCKED",
                Tuple.of(namespace, taskIdentifiers.toArray(String[]::new), fence.toMillis())));
  }

  /**
   * Clears the lock columns of the jobs {@code targetSql} selects (and locks), and the job queue
   * locks the same workers hold on those jobs' queues.
   */
  private Uni<List<ReleasedLock>> unlock(SqlClient client, String targetSql, Tuple params) {
    String jobs = schema + "._private_jobs";
    return client
        .preparedQuery(
            "WITH target AS ("
                + targetSql
                + "),"
                + " unlocked AS (UPDATE "
                + jobs
                + " j SET locked_at = NULL, locked_by = NULL FROM target"
                + "   WHERE j.id = target.id AND j.locked_by = target.locked_by),"
                + " queues AS (UPDATE "
                + schema
                + "._private_job_queues q SET locked_at = NULL, locked_by = NULL"
                + "   FROM target WHERE q.id = target.job_queue_id"
                + "   AND q.locked_by = target.locked_by)"
                + " SELECT id, locked_by, identifier, payload, key, owner_id,"
                + " proof || ' (job key ' || coalesce(key, 'none') || ')' AS proof"
                + " FROM target ORDER BY id")
        .execute(params)
        .map(
            rows -> {
              List<ReleasedLock> released = new ArrayList<>(rows.size());
              for (Row r : rows) {
                String payload = r.getString("payload");
                released.add(
                    new ReleasedLock(
                        r.getLong("id"),
                        r.getString("identifier"),
                        r.getString("locked_by"),
                        deliveryOf(payload),
                        r.getUUID("owner_id"),
                        r.getString("proof")));
              }
              return released;
            })
        .call(
            released ->
                released.isEmpty() ? Uni.createFrom().voidItem() : nudge(client, released.size()));
  }

  /**
   * Tells the queue's runners that {@code n} jobs are available again: graphile-worker's runners
   * listen on {@code jobs:insert} and wake up to {@code count} idle workers, which would otherwise
   * find the released jobs only at their next poll (500 ms in world-postgres, 2 s by graphile's
   * default). A notification is delivered at commit, so no runner looks before the release is
   * visible; one too many only costs an idle worker a poll.
   */
  private static Uni<Void> nudge(SqlClient client, int n) {
    return client
        .preparedQuery("SELECT pg_notify('jobs:insert', $1)")
        .execute(Tuple.of("{\"count\":" + n + "}"))
        .replaceWithVoid();
  }

  private Uni<List<ReleasedLock>> ifKnown(
      SqlClient client, String otherwise, Supplier<Uni<List<ReleasedLock>>> action) {
    return client
        .preparedQuery(
            "SELECT to_regclass($1 || '._private_jobs') IS NOT NULL"
                + " AND to_regclass($1 || '._private_tasks') IS NOT NULL AS known")
        .execute(Tuple.of(schema))
        .chain(
            rows -> {
              if (!rows.iterator().next().getBoolean("known")) {
                LOG.warnf(
                    "queue schema %s has no graphile-worker 0.16 tables; %s",
                    schemaName, otherwise);
                return Uni.createFrom().item(List.<ReleasedLock>of());
              }
              return action.get();
            });
  }

  /** The message id of an engine payload ({@code messageId}), or null. */
  static String messageIdOf(String payload) {
    try {
      JsonNode id = JSON.readTree(payload).path("messageId");
      return id.isTextual() ? id.asText() : null;
    } catch (Exception e) {
      return null;
    }
  }

  /**
   * The run a job belongs to: the engine's payload carries it only inside {@code data}, the base64
   * of a JSON body with {@code runId} (or {@code workflowRunId} for steps). Null when unreadable.
   */
  static String runIdOf(String payload) {
    JsonNode body = bodyOf(payload);
    for (String field : new String[] {"runId", "workflowRunId"}) {
      if (body.path(field).isTextual()) {
        return body.path(field).asText();
      }
    }
    return null;
  }

  /** The step a step message executes ({@code stepId} in its body), or null for other jobs. */
  static String stepIdOf(String payload) {
    JsonNode step = bodyOf(payload).path("stepId");
    return step.isTextual() ? step.asText() : null;
  }

  /** The run, message and step (of a step message) an engine payload names; nulls where not. */
  static Delivery deliveryOf(String payload) {
    return new Delivery(runIdOf(payload), messageIdOf(payload), stepIdOf(payload));
  }

  /** An engine payload's message body (base64 JSON in {@code data}), or a missing node. */
  private static JsonNode bodyOf(String payload) {
    try {
      JsonNode data = JSON.readTree(payload).path("data");
      if (!data.isTextual()) {
        return com.fasterxml.jackson.databind.node.MissingNode.getInstance();
      }
      return JSON.readTree(
          new String(Base64.getDecoder().decode(data.asText()), StandardCharsets.UTF_8));
    } catch (Exception e) {
      return com.fasterxml.jackson.databind.node.MissingNode.getInstance();
    }
  }
}
