package dev.rollcall.queue;

import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.testing.Db;
import dev.rollcall.testing.ServiceTest;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Test;

/**
 * A leave or a death of an instance that named no queue worker, had none learned and reported no
 * message reads no job: the queue may hold every job of a deploy's recovery (100 000 and more), and
 * a scan of it took 450 ms of PostgreSQL's time per leave in the recovery benchmark. The plans are
 * checked as PostgreSQL runs them, with a queue of jobs to read.
 */
@ServiceTest
class GraphileQueuePlanTest {

  private final GraphileQueue queue =
      new GraphileQueue("small", "graphile_worker", List.of("workflow_flows", "workflow_steps"));

  @Test
  void releasingTheLocksOfAnInstanceWithoutWorkersReadsNoJob() throws Exception {
    String plan =
        explain(
            queue.releaseTargetSql(),
            "text[], text[], uuid, text",
            "'{}', '{workflow_flows,workflow_steps}', '" + UUID.randomUUID() + "', 'small'");
    assertTrue(plan.contains("One-Time Filter"), plan);
    assertTrue(jobsNeverRead(plan), plan);
  }

  @Test
  void learningTheWorkersOfAnInstanceThatReportedNoMessageReadsNoJob() throws Exception {
    String plan =
        explain(
            queue.learnAtDeathSql(),
            "uuid, text, text[]",
            "'" + UUID.randomUUID() + "', 'small', '{workflow_flows,workflow_steps}'");
    assertTrue(plan.contains("One-Time Filter"), plan);
    assertTrue(jobsNeverRead(plan), plan);
  }

  /** Every node that reads graphile's jobs table says "never executed". */
  private static boolean jobsNeverRead(String plan) {
    return plan.lines()
        .filter(l -> l.contains("_private_jobs j"))
        .allMatch(l -> l.contains("never executed"));
  }

  /** EXPLAIN ANALYZE of the statement with these parameters, in a transaction rolled back. */
  private static String explain(String sql, String types, String args) throws Exception {
    try (Connection c = Db.database().connect();
        Statement st = c.createStatement()) {
      c.setAutoCommit(false);
      // A queue to read: without jobs the planner may skip the scan for reasons of its own.
      st.execute(
          "INSERT INTO graphile_worker._private_tasks (identifier) VALUES ('workflow_flows')"
              + " ON CONFLICT DO NOTHING");
      st.execute(
          "INSERT INTO graphile_worker._private_jobs (task_id, payload, key)"
              + " SELECT t.id, '{}'::json, 'plan-test-' || g FROM graphile_worker._private_tasks t,"
              + " generate_series(1, 1000) g WHERE t.identifier = 'workflow_flows'");
      st.execute("ANALYZE graphile_worker._private_jobs");
      st.execute("PREPARE planned(" + types + ") AS " + sql);
      StringBuilder plan = new StringBuilder();
      try (ResultSet rs = st.executeQuery("EXPLAIN ANALYZE EXECUTE planned(" + args + ")")) {
        while (rs.next()) {
          plan.append(rs.getString(1)).append('\n');
        }
      }
      c.rollback();
      return plan.toString();
    }
  }
}
