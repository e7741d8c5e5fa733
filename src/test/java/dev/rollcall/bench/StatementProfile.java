package dev.rollcall.bench;

import dev.rollcall.testing.TestDatabase;
import java.util.List;

/**
 * Where PostgreSQL spent its time during one benchmark scenario, by statement: with {@code
 * -Dbench.statements=N}, the N statements of the benchmark's database that took the most execution
 * time, from {@code pg_stat_statements}. The database must load the extension ({@code
 * shared_preload_libraries}); point the benchmark at one with {@code ROLLCALL_TEST_JDBC_URL}.
 * Without it the profile says so once and the benchmark runs on.
 */
final class StatementProfile {

  private final TestDatabase db;
  private final int top;
  private boolean on;

  private StatementProfile(TestDatabase db, int top) {
    this.db = db;
    this.top = top;
  }

  /** The profile asked for by {@code bench.statements} (0 or unset: off). */
  static StatementProfile of(TestDatabase db) {
    StatementProfile p = new StatementProfile(db, Integer.getInteger("bench.statements", 0));
    if (p.top > 0) {
      try {
        db.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
        db.column("SELECT count(*) FROM pg_stat_statements");
        p.on = true;
      } catch (RuntimeException e) {
        System.out.println(
            "bench.statements: pg_stat_statements is not loaded by this database; no statement"
                + " profile ("
                + e.getMessage().lines().findFirst().orElse("")
                + ")");
      }
    }
    return p;
  }

  /** Forgets what was counted so far: the next {@link #print} covers what runs from now. */
  void reset() {
    if (on) {
      db.column("SELECT pg_stat_statements_reset()");
    }
  }

  /** Prints the statements that took the most time since {@link #reset}, in this database. */
  void print(String scenario) {
    if (!on) {
      return;
    }
    List<List<String>> rows =
        db.rows(
            "SELECT s.calls, round(s.total_exec_time)::bigint, round(s.mean_exec_time::numeric, 2),"
                + " round(s.max_exec_time::numeric, 1), s.rows,"
                + " left(regexp_replace(s.query, '\\s+', ' ', 'g'), 110)"
                + " FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid"
                + " WHERE d.datname = current_database()"
                + " ORDER BY s.total_exec_time DESC LIMIT "
                + top);
    String total =
        db.column(
                "SELECT round(coalesce(sum(s.total_exec_time), 0))::bigint FROM pg_stat_statements s"
                    + " JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = current_database()")
            .get(0);
    System.out.printf(
        "%nStatements of %s by execution time (all statements: %s ms):%n"
            + "| calls | total ms | mean ms | max ms | rows | statement |%n|---|---|---|---|---|---|%n",
        scenario, total);
    for (List<String> r : rows) {
      System.out.printf(
          "| %s | %s | %s | %s | %s | `%s` |%n",
          r.get(0), r.get(1), r.get(2), r.get(3), r.get(4), r.get(5).replace("|", "\\|"));
    }
  }
}
