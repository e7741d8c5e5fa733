package dev.rollcall.queue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.rollcall.source.Sql;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Row;
import io.vertx.mutiny.sqlclient.SqlClient;
import io.vertx.mutiny.sqlclient.Tuple;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import org.jboss.logging.Logger;

/**
 * A graphile-worker queue (0.16 layout: {@code _private_jobs}, {@code _private_tasks}, {@code
 * _private_job_queues}). Releasing a dead worker's locks is what {@code force_unlock_workers} does,
 * scoped to this namespace's task identifiers, because several applications may share one queue
 * schema. Only the lock columns change: payload, attempts, key and {@code run_at} stay as they
 * were.
 */
public final class GraphileQueue implements QueueLocks {

  private static final Logger LOG = Logger.getLogger(GraphileQueue.class);
  private static final ObjectMapper JSON = new ObjectMapper();

  private final String schemaName;
  private final String schema;
  private final List<String> taskIdentifiers;

  /**
   * @param schema the queue's schema, usually {@code graphile_worker}
   * @param taskIdentifiers this namespace's task identifiers, e.g. {@code workflow_flows}
   */
  public GraphileQueue(String schema, List<String> taskIdentifiers) {
    this.schemaName = schema;
    this.schema = Sql.ident(schema);
    this.taskIdentifiers = List.copyOf(taskIdentifiers);
  }

  /** The task identifiers whose jobs this namespace owns. */
  public List<String> taskIdentifiers() {
    return taskIdentifiers;
  }

  @Override
  public Uni<List<ReleasedLock>> releaseLocksOf(SqlClient client, List<String> workerIds) {
    return client
        .preparedQuery(
            "SELECT to_regclass($1 || '._private_jobs') IS NOT NULL"
                + " AND to_regclass($1 || '._private_tasks') IS NOT NULL AS known")
        .execute(Tuple.of(schema))
        .chain(
            rows -> {
              if (!rows.iterator().next().getBoolean("known")) {
                LOG.warnf(
                    "queue schema %s has no graphile-worker 0.16 tables; locks of workers %s are"
                        + " left for graphile-worker's own 4-hour expiry",
                    schemaName, workerIds);
                return Uni.createFrom().item(List.<ReleasedLock>of());
              }
              return release(client, workerIds);
            });
  }

  private Uni<List<ReleasedLock>> release(SqlClient client, List<String> workerIds) {
    String jobs = schema + "._private_jobs";
    return client
        .preparedQuery(
            "WITH target AS (SELECT j.id, j.locked_by, t.identifier, j.job_queue_id,"
                + "   j.payload::text AS payload FROM "
                + jobs
                + " j JOIN "
                + schema
                + "._private_tasks t ON t.id = j.task_id"
                + "   WHERE j.locked_by = ANY($1::text[]) AND t.identifier = ANY($2::text[])"
                + "   FOR UPDATE OF j),"
                + " unlocked AS (UPDATE "
                + jobs
                + " j SET locked_at = NULL, locked_by = NULL FROM target WHERE j.id = target.id),"
                + " queues AS (UPDATE "
                + schema
                + "._private_job_queues q SET locked_at = NULL, locked_by = NULL"
                + "   WHERE q.locked_by = ANY($1::text[])"
                + "   AND q.id IN (SELECT job_queue_id FROM target))"
                + " SELECT id, locked_by, identifier, payload FROM target ORDER BY id")
        .execute(Tuple.of(workerIds.toArray(String[]::new), taskIdentifiers.toArray(String[]::new)))
        .map(
            rows -> {
              List<ReleasedLock> released = new ArrayList<>(rows.size());
              for (Row r : rows) {
                released.add(
                    new ReleasedLock(
                        r.getLong("id"),
                        r.getString("identifier"),
                        r.getString("locked_by"),
                        runIdOf(r.getString("payload"))));
              }
              return released;
            });
  }

  /**
   * The run a job belongs to: the engine's payload carries it only inside {@code data}, the base64
   * of a JSON body with {@code runId} (or {@code workflowRunId} for steps). Null when unreadable.
   */
  static String runIdOf(String payload) {
    try {
      JsonNode data = JSON.readTree(payload).path("data");
      if (!data.isTextual()) {
        return null;
      }
      JsonNode body =
          JSON.readTree(
              new String(Base64.getDecoder().decode(data.asText()), StandardCharsets.UTF_8));
      for (String field : new String[] {"runId", "workflowRunId"}) {
        if (body.path(field).isTextual()) {
          return body.path(field).asText();
        }
      }
      return null;
    } catch (Exception e) {
      return null;
    }
  }
}
