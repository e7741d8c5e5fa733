package dev.rollcall.source;

import dev.rollcall.queue.QueueLocks;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Row;
import io.vertx.mutiny.sqlclient.RowSet;
import io.vertx.mutiny.sqlclient.SqlClient;
import io.vertx.mutiny.sqlclient.Tuple;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.stream.Collectors;

/**
 * A namespace's runs in one table, read column by column. The scan reads only the id, name and
 * status columns (never payloads), walks the id with keyset pagination and stops at the epoch's
 * snapshot bound, so one epoch reads each active run once.
 */
public final class TableSource implements RunSource {

  private final String namespace;
  private final String schema;
  private final String table;
  private final String qualifiedTable;
  private final String id;
  private final String status;
  private final String name;
  private final Optional<String> createdAt;
  private final Optional<String> updatedAt;
  private final List<String> activeStatuses;
  private final Optional<String> pendingStatus;
  private final String queueNameTemplate;
  private final String activeFilter;
  private final Optional<QueueLocks> queue;

  /**
   * The id column's SQL type, read from the catalog on first use. Cursors are kept as text and cast
   * back to it, so the keyset comparison uses the column's own ordering and its index.
   */
  private volatile String idType;

  TableSource(
      String namespace,
      String schema,
      String table,
      String idColumn,
      String statusColumn,
      String nameColumn,
      Optional<String> createdAtColumn,
      Optional<String> updatedAtColumn,
      List<String> activeStatuses,
      Optional<String> pendingStatus,
      String queueNameTemplate,
      Optional<QueueLocks> queue) {
    if (activeStatuses.isEmpty()) {
      throw new IllegalArgumentException("active-statuses must name at least one status");
    }
    if (!queueNameTemplate.contains("{name}")) {
      throw new IllegalArgumentException(
          "queue-name-template must contain {name}: '" + queueNameTemplate + "'");
    }
    this.namespace = namespace;
    this.schema = schema;
    this.table = table;
    this.qualifiedTable = Sql.ident(schema) + "." + Sql.ident(table);
    this.id = Sql.ident(idColumn);
    this.status = Sql.ident(statusColumn);
    this.name = Sql.ident(nameColumn);
    this.createdAt = createdAtColumn.map(Sql::ident);
    this.updatedAt = updatedAtColumn.map(Sql::ident);
    this.activeStatuses = List.copyOf(activeStatuses);
    this.pendingStatus = pendingStatus;
    this.queueNameTemplate = queueNameTemplate;
    this.queue = queue;
    // Literals, not a parameter: a partial index "WHERE status IN (...)" can only serve a query
    // whose predicate the planner can prove implies it.
    this.activeFilter =
        status
            + " IN ("
            + activeStatuses.stream().map(Sql::literal).collect(Collectors.joining(", "))
            + ")";
  }

  @Override
  public String namespace() {
    return namespace;
  }

  @Override
  public String describe() {
    return qualifiedTable;
  }

  @Override
  public String queueName(String workflowName) {
    return queueNameTemplate.replace("{name}", workflowName == null ? "" : workflowName);
  }

  @Override
  public Optional<QueueLocks> queue() {
    return queue;
  }

  @Override
  public boolean isPending(ScannedRun run) {
    return pendingStatus.map(p -> p.equals(run.status())).orElse(false);
  }

  @Override
  public List<String> activeStatuses() {
    return activeStatuses;
  }

  @Override
  public Uni<Snapshot> snapshot(SqlClient client) {
    return client
        .query("SELECT max(" + id + ")::text AS max_id, now() AS taken_at FROM " + qualifiedTable)
        .execute()
        .map(
            rows -> {
              Row row = rows.iterator().next();
              return new Snapshot(row.getString("max_id"), row.getOffsetDateTime("taken_at"));
            });
  }

  @Override
  public Uni<List<ScannedRun>> page(
      SqlClient client,
      Snapshot snapshot,
      Optional<String> after,
      int limit,
      Duration activityFence) {
    if (snapshot.maxRunId() == null) {
      return Uni.createFrom().item(List.of());
    }
    return idType(client)
        .chain(
            type -> {
              List<Object> params = new ArrayList<>();
              params.add(activityFence.toMillis());
              params.add(snapshot.maxRunId());
              StringBuilder sql =
                  new StringBuilder(select())
                      .append(" WHERE ")
                      .append(activeFilter)
                      .append(" AND ")
                      .append(id)
                      .append(" <= ($2::text)::")
                      .append(type);
              createdAt.ifPresent(
                  c -> {
                    params.add(snapshot.takenAt());
                    sql.append(" AND ").append(c).append(" <= $").append(params.size());
                  });
              after.ifPresent(
                  cursor -> {
                    params.add(cursor);
                    sql.append(" AND ")
                        .append(id)
                        .append(" > ($")
                        .append(params.size())
                        .append("::text)::")
                        .append(type);
                  });
              params.add(limit);
              sql.append(" ORDER BY ").append(id).append(" LIMIT $").append(params.size());
              return client.preparedQuery(sql.toString()).execute(Tuple.from(params));
            })
        .map(TableSource::runs);
  }

  @Override
  public Uni<Map<String, ScannedRun>> lookup(
      SqlClient client, Collection<String> runIds, Duration activityFence) {
    if (runIds.isEmpty()) {
      return Uni.createFrom().item(Map.of());
    }
    return idType(client)
        .chain(
            type ->
                client
                    .preparedQuery(
                        select() + " WHERE " + id + " = ANY(($2::text[])::" + type + "[])")
                    .execute(Tuple.of(activityFence.toMillis(), runIds.toArray(String[]::new))))
        .map(
            rows -> {
              Map<String, ScannedRun> found = new HashMap<>();
              for (ScannedRun run : runs(rows)) {
                found.put(run.runId(), run);
              }
              return found;
            });
  }

  /** The columns a scan reads; {@code $1} is the activity fence in milliseconds. */
  private String select() {
    // Without an activity column no run is recently active; "$1 IS NULL" (never true: the fence
    // is always given) keeps $1 referenced so both shapes take the same parameters.
    String recent =
        updatedAt
            .map(u -> "coalesce(" + u + " > now() - $1::bigint * interval '1 millisecond', false)")
            .orElse("($1::bigint IS NULL)");
    return "SELECT "
        + id
        + "::text AS run_id, "
        + name
        + "::text AS workflow_name, "
        + status
        + "::text AS status, "
        + recent
        + " AS recently_active FROM "
        + qualifiedTable;
  }

  private static List<ScannedRun> runs(RowSet<Row> rows) {
    List<ScannedRun> runs = new ArrayList<>(rows.size());
    for (Row row : rows) {
      runs.add(
          new ScannedRun(
              row.getString("run_id"),
              row.getString("workflow_name"),
              row.getString("status"),
              row.getBoolean("recently_active")));
    }
    return runs;
  }

  @Override
  public Uni<Void> probe(SqlClient client) {
    String sql =
        "SELECT "
            + id
            + ", "
            + status
            + ", "
            + name
            + createdAt.map(c -> ", " + c).orElse("")
            + updatedAt.map(u -> ", " + u).orElse("")
            + " FROM "
            + qualifiedTable
            + " LIMIT 0";
    return client.query(sql).execute().chain(rows -> idType(client)).replaceWithVoid();
  }

  private Uni<String> idType(SqlClient client) {
    String known = idType;
    if (known != null) {
      return Uni.createFrom().item(known);
    }
    return client
        .preparedQuery(
            "SELECT format_type(a.atttypid, a.atttypmod) AS type FROM pg_attribute a"
                + " JOIN pg_class c ON c.oid = a.attrelid"
                + " JOIN pg_namespace n ON n.oid = c.relnamespace"
                + " WHERE n.nspname = $1 AND c.relname = $2 AND a.attname = $3"
                + " AND NOT a.attisdropped")
        .execute(Tuple.of(schema, table, unquote(id)))
        .map(
            rows -> {
              if (rows.size() == 0) {
                throw new IllegalStateException(
                    "id column " + id + " of " + qualifiedTable + " does not exist");
              }
              String type = rows.iterator().next().getString("type");
              idType = type;
              return type;
            });
  }

  private static String unquote(String quoted) {
    return quoted.substring(1, quoted.length() - 1);
  }
}
