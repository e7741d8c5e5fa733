package dev.rollcall.source;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.testing.Db;
import dev.rollcall.testing.Plans;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import jakarta.inject.Inject;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Base64;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Functions whose PL/pgSQL body catches errors (an EXCEPTION block, a subtransaction) must be
 * PARALLEL UNSAFE: PostgreSQL 15 cannot start a subtransaction during a parallel operation, so a
 * statement calling one under a parallel plan fails instead of answering (PostgreSQL 17 runs it).
 * Large tables get parallel plans (the engine's queue from about 8 MB, {@code
 * min_parallel_table_scan_size}); the tests make them cheap on small ones ({@link
 * #PARALLEL_PLANS}). The catalog rule and the takeover's plan fail on any version without V15; the
 * function calls fail on PostgreSQL 15 (run with {@code ROLLCALL_TEST_JDBC_URL} at one).
 */
@ServiceTest
class ParallelUnsafeFunctionsTest {

  /** A transaction's settings under which even a one-row table is scanned in parallel. */
  private static final List<String> PARALLEL_PLANS =
      List.of(
          "SET LOCAL parallel_setup_cost = 0",
          "SET LOCAL parallel_tuple_cost = 0",
          "SET LOCAL min_parallel_table_scan_size = 0");

  private static final String RUN_ID = "parallel-unsafe-run-1";
  private static final String JOB_KEY = "parallel-unsafe-job-1";

  @Inject RunSources sources;

  @BeforeEach
  void queueOneEngineJob() {
    String data =
        Base64.getEncoder()
            .encodeToString(("{\"runId\":\"" + RUN_ID + "\"}").getBytes(StandardCharsets.UTF_8));
    Db.update(
        "INSERT INTO graphile_worker._private_tasks (identifier) VALUES ('workflow_flows')"
            + " ON CONFLICT DO NOTHING");
    Db.update(
        "INSERT INTO graphile_worker._private_jobs (task_id, payload, key)"
            + " SELECT id, json_build_object('data', ?::text), ?"
            + " FROM graphile_worker._private_tasks WHERE identifier = 'workflow_flows'",
        data,
        JOB_KEY);
  }

  @AfterEach
  void removeIt() {
    Db.update("DELETE FROM graphile_worker._private_jobs WHERE key = ?", JOB_KEY);
  }

  @Test
  void everyRollcallFunctionThatCatchesErrorsIsParallelUnsafe() {
    List<String> wronglyMarked =
        Db.column(
            "SELECT p.proname || ' (' || p.proparallel::text || ')' FROM pg_proc p"
                + " JOIN pg_namespace n ON n.oid = p.pronamespace"
                + " JOIN pg_language l ON l.oid = p.prolang"
                + " WHERE n.nspname = 'rollcall' AND l.lanname = 'plpgsql'"
                + " AND p.prosrc ~* '\\mexception\\M' AND p.proparallel <> 'u'"
                + " ORDER BY 1");
    assertEquals(List.of(), wronglyMarked);
    // The rule above is not vacuous: the engine's run-id decoder catches errors.
    assertEquals(
        List.of("u"),
        Db.column("SELECT proparallel::text FROM pg_proc WHERE proname = 'engine_run_id'"));
  }

  /** Each such function, called on the engine's queue where a parallel scan of it is cheap. */
  @Test
  void eachAnswersWhereAParallelScanOfTheQueueIsCheap() throws Exception {
    for (String call :
        List.of(
            "rollcall.engine_run_id(j.payload)",
            "rollcall.engine_job_run_id(j.payload)",
            "rollcall.cbor_text(convert_to(j.payload::text, 'UTF8'), 'runId')")) {
      try (Connection c = Db.database().connect();
          Statement st = c.createStatement()) {
        c.setAutoCommit(false);
        for (String set : PARALLEL_PLANS) {
          st.execute(set);
        }
        try (ResultSet rs =
            st.executeQuery(
                "SELECT count(*) FROM graphile_worker._private_jobs j WHERE " + call + " = 'x'")) {
          assertTrue(rs.next(), call);
        } catch (SQLException e) {
          throw new AssertionError(call + ": " + e.getMessage(), e);
        } finally {
          c.rollback();
        }
      }
    }
  }

  /**
   * A takeover's check for queued jobs (no epoch: it decodes the queue's payloads) answers under
   * the plan PostgreSQL picks when a parallel scan of a 20 000-job queue is cheap, as one of a
   * large queue is by default. Before, it failed there, and the takeover handed its runs out
   * unclassified, beside the jobs that were about to wake them.
   */
  @Test
  void aTakeoversQueuedJobsCheckAnswersWhereAParallelScanIsCheap() throws Exception {
    WorldPostgresSource source = (WorldPostgresSource) sources.get(SourceTables.ENGINE);
    String plan =
        Plans.explain(
            20_000,
            st -> {
              for (String set : PARALLEL_PLANS) {
                st.execute(set);
              }
            },
            source.queuedJobsSql(false),
            "text[], text, text[], bigint",
            "'{" + RUN_ID + "}', 'engine', '{workflow_flows,workflow_steps}', 60000");
    assertFalse(plan.contains("Parallel Seq Scan on _private_jobs"), plan);
    assertTrue(plan.contains("_private_jobs"), plan);
  }
}
