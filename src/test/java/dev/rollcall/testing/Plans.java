package dev.rollcall.testing;

import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;

/**
 * The plan PostgreSQL runs for a statement, with a queue of jobs in graphile's table (the tests'
 * database has none, and the planner treats an empty table as it would not a full one). Everything
 * is written in one transaction, rolled back.
 */
public final class Plans {

  /** Extra setup of the transaction, after the jobs are queued and before the plan. */
  @FunctionalInterface
  public interface Setup {
    void on(Statement st) throws Exception;
  }

  private Plans() {}

  /**
   * EXPLAIN ANALYZE of {@code sql} as a prepared statement of parameter {@code types}, executed
   * with {@code args} (SQL literals), with {@code jobs} workflow jobs queued (keys {@code
   * plan-test-1}…) and the tables analyzed after {@code setup}: the plan PostgreSQL makes for these
   * arguments.
   */
  public static String explain(int jobs, Setup setup, String sql, String types, String args)
      throws Exception {
    return explain(jobs, setup, sql, types, args, List.of("force_custom_plan")).get(0);
  }

  /**
   * The two plans a statement the service's pooled connections keep prepared may run with: the plan
   * for these arguments (its first five executions on a connection), then the generic plan
   * PostgreSQL may keep from the sixth on, made once for any arguments. As {@link #explain}.
   */
  public static List<String> explainAsCached(
      int jobs, Setup setup, String sql, String types, String args) throws Exception {
    return explain(
        jobs, setup, sql, types, args, List.of("force_custom_plan", "force_generic_plan"));
  }

  private static List<String> explain(
      int jobs, Setup setup, String sql, String types, String args, List<String> modes)
      throws Exception {
    try (Connection c = Db.database().connect();
        Statement st = c.createStatement()) {
      c.setAutoCommit(false);
      st.execute(
          "INSERT INTO graphile_worker._private_tasks (identifier) VALUES ('workflow_flows')"
              + " ON CONFLICT DO NOTHING");
      st.execute(
          "INSERT INTO graphile_worker._private_jobs (task_id, payload, key)"
              + " SELECT t.id, '{}'::json, 'plan-test-' || g FROM graphile_worker._private_tasks t,"
              + " generate_series(1, "
              + jobs
              + ") g WHERE t.identifier = 'workflow_flows'");
      setup.on(st);
      st.execute("ANALYZE graphile_worker._private_jobs");
      st.execute("PREPARE planned(" + types + ") AS " + sql);
      List<String> plans = new ArrayList<>();
      for (String mode : modes) {
        // Each plan runs on the same rows: what one execution writes is undone before the next.
        st.execute("SAVEPOINT plan");
        st.execute("SET LOCAL plan_cache_mode = " + mode);
        StringBuilder plan = new StringBuilder("plan_cache_mode = " + mode + "\n");
        try (ResultSet rs = st.executeQuery("EXPLAIN ANALYZE EXECUTE planned(" + args + ")")) {
          while (rs.next()) {
            plan.append(rs.getString(1)).append('\n');
          }
        }
        plans.add(plan.toString());
        st.execute("ROLLBACK TO SAVEPOINT plan");
      }
      c.rollback();
      return plans;
    }
  }
}
