package dev.rollcall.source;

import dev.rollcall.queue.QueueLocks;
import dev.rollcall.sql.Sql;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Row;
import io.vertx.mutiny.sqlclient.RowSet;
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
import java.util.OptionalLong;
import java.util.Set;
import java.util.stream.Collectors;

/**
 * A namespace's runs in one table, read column by column. The scan reads only the id, name and
 * status columns (never payloads), walks the id with keyset pagination and stops at the epoch's
 * snapshot bound, so one epoch reads each active run once.
 */
public final class TableSource implements RunSource {

  /** An optional equality filter that tells this namespace's runs from others in one table. */
  public record RunFilter(String column, String value) {}

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
  private final Optional<RunFilter> runFilter;

  /**
   * The column types, read from the catalog again at every snapshot (and readiness probe), so an
   * engine upgrade that adds a column (such as {@code job_prefix}) is seen by the next epoch, not
   * only after a restart; pages of one epoch use what its snapshot saw. Cursors are kept as text
   * and cast back to the id type, so keyset comparisons use the column's own ordering and its
   * index; timestamps without time zone are read as UTC.
   */
  private volatile Columns columns;

  /** What the catalog says about the table, resolved once. */
  record Columns(
      String idType,
      Optional<String> createdAt,
      Optional<String> updatedAt,
      Optional<String> filter) {}

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
      Optional<QueueLocks> queue,
      Optional<RunFilter> runFilter) {
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
    this.runFilter = runFilter;
    runFilter.ifPresent(f -> Sql.ident(f.column()));
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

  /** The schema of the runs table. */
  public String schema() {
    return schema;
  }

  /** The qualified, quoted runs table. */
  public String qualifiedTable() {
    return qualifiedTable;
  }

  @Override
  public Optional<QueueLocks> queue() {
    return queue;
  }

  @Override
  public Optional<String> activeIndexDdl() {
    return Optional.of(
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS "
            + Sql.ident(table + "_rollcall_active")
            + " ON "
            + qualifiedTable
            + " ("
            + id
            + ") WHERE "
            + activeFilter);
  }

  @Override
  public String queueName(String workflowName) {
    return queueNameTemplate.replace("{name}", workflowName == null ? "" : workflowName);
  }

  @Override
  public boolean isPending(ScannedRun run) {
    return pendingStatus.map(p -> p.equals(run.status())).orElse(false);
  }

  @Override
  public List<String> activeStatuses() {
    return activeStatuses;
  }

  /**
   * The runs filter in force: configured, and its column present (newer engine versions add it).
   */
  public Uni<Boolean> filtered(SqlClient client) {
    return columns(client).map(c -> c.filter().isPresent());
  }

  @Override
  public Uni<Snapshot> snapshot(SqlClient client) {
    return readColumns(client)
        .chain(
            c ->
                client
                    .query(
                        "SELECT max("
                            + id
                            + ")::text AS max_id, now() AS taken_at FROM "
                            + qualifiedTable
                            + c.filter().map(f -> " WHERE " + f).orElse(""))
                    .execute())
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
    return page(client, snapshot, new Start(after, OptionalLong.empty()), limit, activityFence);
  }

  @Override
  public Uni<List<ScannedRun>> pageAfterEpochCursor(
      SqlClient client, Snapshot snapshot, long epochId, int limit, Duration activityFence) {
    return page(
        client,
        snapshot,
        new Start(Optional.empty(), OptionalLong.of(epochId)),
        limit,
        activityFence);
  }

  /**
   * Where a page starts: after the run id {@code after}, or after the committed scan cursor of the
   * epoch {@code epochId} (or at the first run when neither is given).
   */
  private record Start(Optional<String> after, OptionalLong epochId) {}

  /** The page of active runs from {@code start}. */
  private Uni<List<ScannedRun>> page(
      SqlClient client, Snapshot snapshot, Start start, int limit, Duration activityFence) {
    if (snapshot.maxRunId() == null) {
      return Uni.createFrom().item(List.of());
    }
    return columns(client)
        .chain(
            c -> {
              List<Object> params = new ArrayList<>();
              params.add(activityFence.toMillis());
              params.add(snapshot.maxRunId());
              StringBuilder sql =
                  new StringBuilder(select(c))
                      .append(" WHERE ")
                      .append(activeFilter)
                      .append(" AND ")
                      .append(id)
                      .append(" <= ($2::text)::")
                      .append(c.idType());
              c.filter().ifPresent(f -> sql.append(" AND ").append(f));
              c.createdAt()
                  .ifPresent(
                      created -> {
                        params.add(snapshot.takenAt());
                        sql.append(" AND ").append(created).append(" <= $").append(params.size());
                      });
              start
                  .after()
                  .ifPresent(
                      cursor -> {
                        params.add(cursor);
                        sql.append(" AND ")
                            .append(id)
                            .append(" > ($")
                            .append(params.size())
                            .append("::text)::")
                            .append(c.idType());
                      });
              if (start.epochId().isPresent()) {
                // Read by this statement (a new snapshot: it sees the cursor the last holder of
                // the epoch's lock committed), once, as an init plan; the index range scan starts
                // there.
                params.add(start.epochId().getAsLong());
                sql.append(" AND ")
                    .append(id)
                    .append(" > ((SELECT e.scan_cursor FROM rollcall.epochs e WHERE e.id = $")
                    .append(params.size())
                    .append("::bigint)::text)::")
                    .append(c.idType());
              }
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
    return columns(client)
        .chain(
            c ->
                client
                    .preparedQuery(
                        select(c)
                            + " WHERE "
                            + id
                            + " = ANY(($2::text[])::"
                            + c.idType()
                            + "[])"
                            + c.filter().map(f -> " AND " + f).orElse(""))
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

  /** With an activity column: the runs not updated since they were re-driven. */
  @Override
  public Uni<Set<String>> unchangedSince(SqlClient client, Map<String, OffsetDateTime> redriven) {
    if (redriven.isEmpty() || updatedAt.isEmpty()) {
      return Uni.createFrom().item(Set.of());
    }
    List<String> ids = new ArrayList<>(redriven.keySet());
    OffsetDateTime[] times = ids.stream().map(redriven::get).toArray(OffsetDateTime[]::new);
    return columns(client)
        .chain(
            c ->
                client
                    .preparedQuery(
                        "SELECT u.run_id FROM unnest($1::text[], $2::timestamptz[]) AS u(run_id, t)"
                            + " JOIN "
                            + qualifiedTable
                            + " r ON r."
                            + id
                            + " = (u.run_id)::"
                            + c.idType()
                            + " WHERE "
                            + c.updatedAt().orElseThrow()
                            + " <= u.t")
                    .execute(Tuple.of(ids.toArray(String[]::new), times)))
        .map(
            rows -> {
              Set<String> unchanged = new HashSet<>();
              rows.forEach(r -> unchanged.add(r.getString("run_id")));
              return unchanged;
            });
  }

  /** The columns a scan reads; {@code $1} is the activity fence in milliseconds. */
  private String select(Columns c) {
    // Without an activity column no run is recently active; "$1 IS NULL" (never true: the fence
    // is always given) keeps $1 referenced so both shapes take the same parameters.
    String recent =
        c.updatedAt()
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
    return client.query(sql).execute().chain(rows -> readColumns(client)).replaceWithVoid();
  }

  /** The columns as last read from the catalog; read now on first use. */
  Uni<Columns> columns(SqlClient client) {
    Columns known = columns;
    if (known != null) {
      return Uni.createFrom().item(known);
    }
    return readColumns(client);
  }

  /** Reads the columns from the catalog now, and remembers them. */
  private Uni<Columns> readColumns(SqlClient client) {
    return client
        .preparedQuery(
            "SELECT a.attname AS column, format_type(a.atttypid, a.atttypmod) AS type"
                + " FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
                + " JOIN pg_namespace n ON n.oid = c.relnamespace"
                + " WHERE n.nspname = $1 AND c.relname = $2 AND a.attnum > 0"
                + " AND NOT a.attisdropped")
        .execute(Tuple.of(schema, table))
        .map(
            rows -> {
              Map<String, String> types = new HashMap<>();
              rows.forEach(r -> types.put(r.getString("column"), r.getString("type")));
              String idType = types.get(unquote(id));
              if (idType == null) {
                throw new IllegalStateException(
                    "id column " + id + " of " + qualifiedTable + " does not exist");
              }
              Columns resolved =
                  new Columns(
                      idType,
                      createdAt.map(col -> timestamp(col, types)),
                      updatedAt.map(col -> timestamp(col, types)),
                      runFilter
                          .filter(f -> types.containsKey(f.column()))
                          .map(f -> Sql.ident(f.column()) + " = " + Sql.literal(f.value())));
              columns = resolved;
              return resolved;
            });
  }

  /**
   * A timestamp column as an absolute time. Engines that store {@code timestamp without time zone}
   * write UTC wall-clock time; reading it in the session's zone would shift leases by hours.
   */
  private static String timestamp(String quoted, Map<String, String> types) {
    return "timestamp without time zone".equals(types.get(unquote(quoted)))
        ? "(" + quoted + " AT TIME ZONE 'UTC')"
        : quoted;
  }

  private static String unquote(String quoted) {
    return quoted.substring(1, quoted.length() - 1);
  }
}
