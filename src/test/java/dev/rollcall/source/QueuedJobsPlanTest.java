package dev.rollcall.source;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.testing.Db;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import jakarta.inject.Inject;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import org.junit.jupiter.api.Test;

/**
 * A page's check for queued jobs, within an epoch, probes the page's runs and their jobs by index:
 * it never reads the whole jobs table, which holds every job the pass itself adds (a scan per page
 * made a large pass quadratic). Checked on the plan PostgreSQL runs, with 20 000 queued jobs.
 */
@ServiceTest
class QueuedJobsPlanTest {

  @Inject RunSources sources;

  @Test
  void aPageProbesItsRunsJobsByIndexHoweverLongTheQueue() throws Exception {
    WorldPostgresSource source = (WorldPostgresSource) sources.get(SourceTables.ENGINE);
    try (Connection c = Db.database().connect();
        Statement st = c.createStatement()) {
      c.setAutoCommit(false);
      st.execute(
          "INSERT INTO graphile_worker._private_tasks (identifier) VALUES ('workflow_flows')"
              + " ON CONFLICT DO NOTHING");
      st.execute(
          "INSERT INTO graphile_worker._private_jobs (task_id, payload, key)"
              + " SELECT t.id, '{}'::json, 'plan-test-' || g FROM graphile_worker._private_tasks t,"
              + " generate_series(1, 20000) g WHERE t.identifier = 'workflow_flows'");
      // An epoch's decoded jobs: one in four of 80 000 runs has one, as in the recovery benchmark.
      st.execute(
          "INSERT INTO rollcall.epoch_wake_jobs (epoch_id, run_id, job_id)"
              + " SELECT -1, 'plan-run-' || (4 * n), j.id FROM (SELECT id, row_number() OVER"
              + " (ORDER BY id) AS n FROM graphile_worker._private_jobs"
              + " WHERE key LIKE 'plan-test-%') j");
      st.execute("ANALYZE graphile_worker._private_jobs");
      st.execute("ANALYZE rollcall.epoch_wake_jobs");
      st.execute("PREPARE planned(text[], text, bigint, bigint) AS " + source.queuedJobsSql(true));
      StringBuilder plan = new StringBuilder();
      try (ResultSet rs =
          st.executeQuery(
              "EXPLAIN ANALYZE EXECUTE planned('{"
                  + java.util.stream.IntStream.rangeClosed(40_001, 40_500)
                      .mapToObj(g -> "plan-run-" + g)
                      .collect(java.util.stream.Collectors.joining(","))
                  + "}', 'engine', -1, 60000)")) {
        while (rs.next()) {
          plan.append(rs.getString(1)).append('\n');
        }
      }
      c.rollback();
      String text = plan.toString();
      assertFalse(text.contains("Seq Scan on _private_jobs"), text);
      assertFalse(text.contains("Seq Scan on epoch_wake_jobs"), text);
      assertTrue(text.contains("_private_jobs"), text);
    }
  }
}
