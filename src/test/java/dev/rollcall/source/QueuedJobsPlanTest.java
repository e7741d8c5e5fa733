package dev.rollcall.source;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.testing.Plans;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import jakarta.inject.Inject;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
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
    String page =
        IntStream.rangeClosed(40_001, 40_500)
            .mapToObj(g -> "plan-run-" + g)
            .collect(Collectors.joining(","));
    for (String plan :
        Plans.explainAsCached(
            20_000,
            st -> {
              // An epoch's decoded jobs: one in four of 80 000 runs has one, as in the recovery
              // benchmark.
              st.execute(
                  "INSERT INTO rollcall.epoch_wake_jobs (epoch_id, run_id, job_id)"
                      + " SELECT -1, 'plan-run-' || (4 * n), j.id FROM (SELECT id, row_number()"
                      + " OVER (ORDER BY id) AS n FROM graphile_worker._private_jobs"
                      + " WHERE key LIKE 'plan-test-%') j");
              st.execute("ANALYZE rollcall.epoch_wake_jobs");
            },
            source.queuedJobsSql(true),
            "text[], text, bigint, bigint",
            "'{" + page + "}', 'engine', -1, 60000")) {
      assertFalse(plan.contains("Seq Scan on _private_jobs"), plan);
      assertFalse(plan.contains("Seq Scan on epoch_wake_jobs"), plan);
      assertTrue(plan.contains("_private_jobs"), plan);
    }
  }

  /**
   * The jobs queued after an epoch's decode, for the runs the engine wrote to since, are read by
   * the jobs' primary key from the decode's last one up: the queue's older jobs, however many, are
   * not read again.
   */
  @Test
  void jobsQueuedAfterTheDecodeAreReadFromItsLastJobUp() throws Exception {
    WorldPostgresSource source = (WorldPostgresSource) sources.get(SourceTables.ENGINE);
    for (String plan :
        Plans.explainAsCached(
            20_000,
            st ->
                st.execute(
                    "INSERT INTO rollcall.epochs (id, namespace, kind, deployment_id,"
                        + " wake_jobs_through) OVERRIDING SYSTEM VALUE SELECT -1, 'engine',"
                        + " 'boot', 'plan-test', max(id) - 100 FROM graphile_worker._private_jobs"),
            source.laterJobsSql(),
            "text[], text, bigint, bigint, text[]",
            "'{plan-run-1,plan-run-2}', 'engine', -1, 60000,"
                + " '{workflow_flows,workflow_steps}'")) {
      assertFalse(plan.contains("Seq Scan on _private_jobs"), plan);
      assertTrue(plan.contains("_private_jobs_pkey") || plan.contains("jobs_pkey"), plan);
    }
  }
}
