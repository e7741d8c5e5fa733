package dev.rollcall.recovery;

import dev.rollcall.database.Database;
import dev.rollcall.database.Databases;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Pool;
import io.vertx.mutiny.sqlclient.Row;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.ArrayList;
import java.util.List;
import org.jboss.logging.Logger;

/**
 * Analyzes Rollcall's own tables once they have grown well past what their planner statistics say,
 * rather than waiting for autovacuum's next visit to the database (up to {@code
 * autovacuum_naptime}, a minute by default, after its thresholds are crossed).
 *
 * <p>Why: a fleet that registers on a new database (or one that grows tenfold at once) runs its
 * heartbeat flushes against tables whose statistics still say "empty". The plans made then read
 * whole tables where they should probe one key: a flush's renewal and in-flight sets took 10–42 ms
 * each instead of under 1 ms until the first automatic {@code ANALYZE}, 16 s after 3 000 instances
 * had registered, and the heartbeats that queued meanwhile cost leases (BENCHMARKS.md §8). An
 * {@code ANALYZE} also makes every connection plan its cached statements again.
 *
 * <p>Runs on the reaper's interval on every service replica, when the reaper's look ({@link
 * ReaperTick}) finds a table that {@link #stale} says is stale: then one read of the statistics,
 * and an {@code ANALYZE} of each stale table. Replicas that analyze the same table at once only
 * repeat a cheap sample. Tables the service's database user may not analyze (it does not own them)
 * are left to autovacuum.
 */
@ApplicationScoped
public class FreshStatistics {

  private static final Logger LOG = Logger.getLogger(FreshStatistics.class);

  /** Below this many rows a table's plan does not depend on its statistics enough to matter. */
  static final long MIN_ROWS = 500;

  /** A table is stale once it holds this many times the rows its statistics say. */
  static final double GROWTH = 2.0;

  /**
   * Rollcall's tables with their live rows (the statistics system's count) and the rows their
   * planner statistics say ({@code reltuples}; -1 when never analyzed), for those this user may
   * analyze: it owns them (is a member of the owner's role) or is a superuser. Read from {@code
   * pg_class} and the one statistics function it needs, not from the view {@code
   * pg_stat_user_tables}, which groups every table of the schema with its indexes and computes
   * twenty counters per table: the same rows for 40 % of the database's time (0.27 ms against 0.68
   * ms a read, with pgbench on PostgreSQL 15, Rollcall's schema and a hundred other tables).
   */
  static final String TABLES =
      "SELECT c.relname, pg_stat_get_live_tuples(c.oid) AS n_live_tup, c.reltuples"
          + " FROM pg_class c WHERE c.relnamespace = 'rollcall'::regnamespace AND c.relkind = 'r'"
          + " AND (pg_has_role(c.relowner, 'USAGE')"
          + "   OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user))";

  /** {@link #stale} in SQL, for a row {@code t} of {@link #TABLES}. */
  static final String STALE =
      "t.n_live_tup >= "
          + MIN_ROWS
          + " AND (t.reltuples < 0 OR t.n_live_tup > "
          + GROWTH
          + " * t.reltuples)";

  /**
   * Whether some table is {@link #stale}: the same rule in SQL, for the reaper's look ({@link
   * ReaperTick}), which runs {@link #runOnce} only when it is true.
   */
  static final String ANY_STALE = "EXISTS (SELECT 1 FROM (" + TABLES + ") t WHERE " + STALE + ")";

  private final Databases databases;

  FreshStatistics(Databases databases) {
    this.databases = databases;
  }

  /**
   * Whether a table with {@code liveRows} rows, whose statistics say {@code analyzedRows}
   * (negative: never analyzed), should be analyzed now.
   */
  static boolean stale(long liveRows, double analyzedRows) {
    return liveRows >= MIN_ROWS && (analyzedRows < 0 || liveRows > GROWTH * analyzedRows);
  }

  /** One look in every database; returns the tables it analyzed. Tests call it directly. */
  public Uni<List<String>> runOnce() {
    return databases.inTurn(this::runOnce).map(Databases::flat);
  }

  /** One look in one database; returns the tables it analyzed there. */
  public Uni<List<String>> runOnce(Database db) {
    Pool pool = db.pool();
    return pool.query(TABLES)
        .execute()
        .map(
            rows -> {
              List<String> stale = new ArrayList<>();
              for (Row r : rows) {
                if (stale(r.getLong("n_live_tup"), r.getDouble("reltuples"))) {
                  stale.add(r.getString("relname"));
                }
              }
              return stale;
            })
        .chain(
            stale ->
                Multi.createFrom()
                    .iterable(stale)
                    .onItem()
                    .transformToUniAndConcatenate(
                        table ->
                            pool.query("ANALYZE rollcall." + quoted(table))
                                .execute()
                                .invoke(
                                    () ->
                                        LOG.infof(
                                            "analyzed rollcall.%s: its statistics were stale",
                                            table))
                                .replaceWith(table))
                    .collect()
                    .asList());
  }

  /** A table name as a quoted identifier. */
  static String quoted(String name) {
    return "\"" + name.replace("\"", "\"\"") + "\"";
  }
}
