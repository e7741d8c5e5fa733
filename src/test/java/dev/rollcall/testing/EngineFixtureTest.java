package dev.rollcall.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.util.EnumMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The engine's and the queue's schemas, built by each engine version's own migrations (twice over,
 * in a database of its own: both versions use the schema {@code workflow}), and runs enqueued with
 * each version's own queue code.
 */
class EngineFixtureTest {

  static final Map<EngineVersion, TestDatabase> DBS = new EnumMap<>(EngineVersion.class);

  @BeforeAll
  static void setUp() {
    for (EngineVersion v : EngineVersion.values()) {
      TestDatabase db = TestDatabase.start();
      DBS.put(v, db);
      EngineFixture.setUpSchemas(db, v);
      EngineFixture.setUpSchemas(db, v); // idempotent
    }
  }

  @AfterAll
  static void tearDown() {
    DBS.values().forEach(TestDatabase::close);
    DBS.clear();
  }

  @Test
  void theNoArgumentMethodsStillMeanTheStableEngine() throws Exception {
    assertEquals(EngineVersion.STABLE.installDir(), EngineFixture.install());
    assertEquals(
        EngineVersion.STABLE.packageVersion(),
        Api.JSON
            .readTree(
                EngineFixture.install()
                    .resolve("node_modules/@workflow/world-postgres/package.json")
                    .toFile())
            .path("version")
            .asText());
  }

  @ParameterizedTest
  @EnumSource(EngineVersion.class)
  void eachVersionIsInstalledInItsOwnDirectory(EngineVersion v) throws Exception {
    var manifest =
        EngineFixture.install(v).resolve("node_modules/@workflow/world-postgres/package.json");
    assertTrue(Files.exists(manifest), manifest.toString());
    assertEquals(v.packageVersion(), Api.JSON.readTree(manifest.toFile()).path("version").asText());
    assertEquals(
        "0.16.6",
        Api.JSON
            .readTree(
                EngineFixture.install(v)
                    .resolve("node_modules/graphile-worker/package.json")
                    .toFile())
            .path("version")
            .asText());
  }

  @ParameterizedTest
  @EnumSource(EngineVersion.class)
  void workflowRunsHasTheColumnsRecoveryReads(EngineVersion v) throws SQLException {
    Set<String> columns = columns(v, "workflow_runs");
    for (String c : List.of("id", "status", "name", "created_at", "updated_at")) {
      assertTrue(columns.contains(c), "workflow.workflow_runs lacks " + c + ": " + columns);
    }
    // The job prefix lives in the task identifiers only, never on a run.
    assertFalse(columns.contains("job_prefix"), columns.toString());
  }

  @Test
  void theBetaAddsColumnsButNoneThatRecoveryNeeds() throws SQLException {
    Set<String> stable = columns(EngineVersion.STABLE, "workflow_runs");
    Set<String> beta = columns(EngineVersion.BETA, "workflow_runs");
    Set<String> added = new HashSet<>(beta);
    added.removeAll(stable);
    assertEquals(Set.of("error_code", "attributes", "encryption_public_key"), added);
    assertTrue(beta.containsAll(stable), "the beta dropped run columns: " + stable);
    Set<String> hooksAdded = new HashSet<>(columns(EngineVersion.BETA, "workflow_hooks"));
    hooksAdded.removeAll(columns(EngineVersion.STABLE, "workflow_hooks"));
    assertEquals(Set.of("is_system", "resume_context"), hooksAdded);
    for (String table : List.of("workflow_steps", "workflow_waits", "workflow_events")) {
      assertEquals(columns(EngineVersion.STABLE, table), columns(EngineVersion.BETA, table), table);
    }
  }

  @ParameterizedTest
  @EnumSource(EngineVersion.class)
  void theEngineTablesExist(EngineVersion v) throws SQLException {
    Set<String> tables =
        strings(
            v, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'workflow'");
    for (String t :
        List.of(
            "workflow_runs",
            "workflow_events",
            "workflow_steps",
            "workflow_hooks",
            "workflow_waits")) {
      assertTrue(tables.contains(t), "schema workflow lacks " + t + ": " + tables);
    }
  }

  @Test
  void bothVersionsShareTheQueueLayout() throws SQLException {
    String layout =
        "SELECT table_name || '.' || column_name || ':' || data_type"
            + " FROM information_schema.columns WHERE table_schema = 'graphile_worker'";
    assertEquals(strings(EngineVersion.STABLE, layout), strings(EngineVersion.BETA, layout));
  }

  @ParameterizedTest
  @EnumSource(EngineVersion.class)
  void theQueueCanTakeJobsAndUnlockWorkers(EngineVersion v) throws SQLException {
    Set<String> functions =
        strings(
            v,
            "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
                + " WHERE n.nspname = 'graphile_worker'");
    assertTrue(functions.contains("add_job"), "no graphile_worker.add_job: " + functions);
    assertTrue(
        functions.contains("force_unlock_workers"),
        "no graphile_worker.force_unlock_workers: " + functions);
    Set<String> relations =
        strings(
            v,
            "SELECT table_name FROM information_schema.tables"
                + " WHERE table_schema = 'graphile_worker'");
    for (String t : List.of("jobs", "_private_jobs", "_private_tasks", "_private_job_queues")) {
      assertTrue(relations.contains(t), "no graphile_worker." + t + ": " + relations);
    }
  }

  @ParameterizedTest
  @EnumSource(EngineVersion.class)
  void aJobAddedThroughTheQueueIsStored(EngineVersion v) throws SQLException {
    try (Connection c = DBS.get(v).connect();
        PreparedStatement s =
            c.prepareStatement(
                "SELECT (graphile_worker.add_job('fixture_probe', '{}'::json,"
                    + " job_key := 'fixture-probe')).id")) {
      s.executeQuery().close();
    }
    assertEquals(
        Set.of("fixture_probe"),
        strings(
            v,
            "SELECT t.identifier FROM graphile_worker._private_jobs j"
                + " JOIN graphile_worker._private_tasks t ON t.id = j.task_id"
                + " WHERE j.key = 'fixture-probe'"));
  }

  @ParameterizedTest
  @EnumSource(EngineVersion.class)
  void theEngineEnqueuesARunOnItsFlowsTaskWithoutStartingAWorker(EngineVersion v)
      throws SQLException {
    String runId = EngineRuns.newRunId();
    String name = EngineRuns.DEFAULT_WORKFLOW;
    String messageId = EngineFixture.enqueueAsEngine(DBS.get(v), v, runId, name);
    assertTrue(messageId.matches("msg_[0-9A-HJKMNP-TV-Z]{26}"), messageId);
    List<String> job =
        row(
            v,
            "SELECT t.identifier, j.payload::text, j.key, j.max_attempts::text, j.attempts::text,"
                + " coalesce(j.locked_by, '-'), j.priority::text,"
                + " coalesce(j.job_queue_id::text, '-'), (j.run_at <= now())::text"
                + " FROM graphile_worker._private_jobs j"
                + " JOIN graphile_worker._private_tasks t ON t.id = j.task_id WHERE j.key = ?",
            messageId);
    assertEquals(
        List.of(
            "workflow_flows",
            EngineRuns.flowsPayload(messageId, name, runId, 1),
            messageId,
            "3",
            "0",
            "-",
            "0",
            "-",
            "true"),
        job);
    // No worker ever ran: nothing registered a task of its own, nothing is locked.
    assertFalse(
        strings(v, "SELECT identifier FROM graphile_worker._private_tasks")
            .contains("workflow_steps"));
  }

  @ParameterizedTest
  @EnumSource(EngineVersion.class)
  void theJobPrefixNamesTheTaskAndTheNamespaceLeavesNoTrace(EngineVersion v) throws SQLException {
    String runId = EngineRuns.newRunId();
    String messageId =
        EngineFixture.enqueueAsEngine(DBS.get(v), v, runId, "flowA", "acme_", "tenant1");
    assertEquals(
        List.of("acme_flows", EngineRuns.flowsPayload(messageId, "flowA", runId, 1)),
        row(
            v,
            "SELECT t.identifier, j.payload::text FROM graphile_worker._private_jobs j"
                + " JOIN graphile_worker._private_tasks t ON t.id = j.task_id WHERE j.key = ?",
            messageId));
  }

  @ParameterizedTest
  @EnumSource(EngineVersion.class)
  void aFailedEnqueueFailsLoudlyWithTheEnginesOutput(EngineVersion v) {
    IllegalStateException e =
        assertThrows(
            IllegalStateException.class,
            () ->
                EngineFixture.enqueueAsEngine(
                    DBS.get(v), v, EngineRuns.newRunId(), "flowA", null, "Not-A-Namespace"));
    assertTrue(e.getMessage().contains("exited with 1"), e.getMessage());
    assertTrue(e.getMessage().contains("lowercase alphanumeric"), e.getMessage());
  }

  @Test
  void theJdbcUrlBecomesAnEncodedPostgresUrl() {
    assertEquals(
        "postgres://us%40er:p%3Aw%2Fd%20x@localhost:5433/app",
        EngineFixture.postgresUrl(
            "jdbc:postgresql://localhost:5433/app?loggerLevel=OFF", "us@er", "p:w/d x"));
  }

  private static Set<String> columns(EngineVersion v, String table) throws SQLException {
    return strings(
        v,
        "SELECT column_name FROM information_schema.columns"
            + " WHERE table_schema = 'workflow' AND table_name = '"
            + table
            + "'");
  }

  private static Set<String> strings(EngineVersion v, String sql) {
    return new HashSet<>(DBS.get(v).column(sql));
  }

  private static List<String> row(EngineVersion v, String sql, Object... params) {
    return DBS.get(v).row(sql, params);
  }
}
