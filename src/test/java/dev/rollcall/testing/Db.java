package dev.rollcall.testing;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.postgresql.PGConnection;

/** Direct reads and writes of the test database, for checks a client cannot see. */
public final class Db {

  private static volatile TestDatabase bound;

  private Db() {}

  /** Points these helpers at a database (the test resource does so for service tests). */
  public static void bind(TestDatabase database) {
    bound = database;
  }

  /** The bound database. */
  public static TestDatabase database() {
    return bound;
  }

  /** The first column of every row. */
  public static List<String> column(String sql, Object... params) {
    return bound.column(sql, params);
  }

  public static long number(String sql, Object... params) {
    return Long.parseLong(column(sql, params).get(0));
  }

  public static Set<String> set(String sql, Object... params) {
    return new HashSet<>(column(sql, params));
  }

  public static int update(String sql, Object... params) {
    return bound.update(sql, params);
  }

  /**
   * A connection of its own holding the lock of epoch {@code epochId} as a claim takes it, until it
   * rolls back or closes.
   */
  public static Connection holdingEpochLock(long epochId) throws SQLException {
    return holding("SELECT 1 FROM rollcall.epochs WHERE id = ? FOR NO KEY UPDATE", epochId);
  }

  /**
   * A connection of its own that ran {@code lockingSql} (a {@code SELECT ... FOR ...} of one row,
   * {@code key} its parameter) in a transaction left open: it holds that lock until it rolls back
   * or closes.
   */
  public static Connection holding(String lockingSql, Object key) throws SQLException {
    Connection c = bound.connect();
    c.setAutoCommit(false);
    try (PreparedStatement st = c.prepareStatement(lockingSql)) {
      st.setObject(1, key);
      st.executeQuery().close();
    }
    return c;
  }

  /**
   * Waits until a statement containing {@code fragment} waits for a lock that {@code holder}'s
   * transaction holds, as {@code pg_blocking_pids} shows it: from then on, what runs that statement
   * cannot finish before {@code holder} ends, so a test may assert that it has not.
   */
  public static void awaitWaitingBehind(Connection holder, String fragment) throws SQLException {
    int pid = holder.unwrap(PGConnection.class).getBackendPID();
    Poll.until(
        "a statement with '" + fragment + "' waits for a lock of backend " + pid,
        Duration.ofSeconds(20),
        () ->
            number(
                    "SELECT count(*) FROM pg_stat_activity WHERE ?::int = ANY(pg_blocking_pids(pid))"
                        + " AND strpos(query, ?) > 0",
                    pid,
                    fragment)
                > 0);
  }

  /**
   * How many sessions wait for an epoch's lock the way a queued claim or a complete's close takes
   * it (the plain {@code FOR NO KEY UPDATE}, not {@code SKIP LOCKED}), or the way a complete checks
   * whether its pass is over ({@code FOR SHARE}).
   */
  public static long waitingForEpochLock() {
    return number("SELECT count(*) FROM pg_stat_activity WHERE " + EPOCH_LOCK_WAITERS);
  }

  /** Ends the sessions {@link #waitingForEpochLock} counts; returns how many. */
  public static long terminateEpochLockWaiters() {
    return number(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
            + EPOCH_LOCK_WAITERS);
  }

  private static final String EPOCH_LOCK_WAITERS =
      "wait_event_type = 'Lock' AND (query LIKE '%FOR NO KEY UPDATE%'"
          + " OR query LIKE '%rollcall.epochs%FOR SHARE%') AND query NOT LIKE '%SKIP LOCKED%'";

  /** The active run ids of a test namespace's table. */
  public static Set<String> activeRuns(String namespace) {
    return set(
        "SELECT id FROM "
            + SourceTables.table(namespace)
            + " WHERE status IN ('pending','running')");
  }
}
