package dev.rollcall.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The engine's and the queue's schemas, built by the packages' own migrations, twice over. */
class EngineFixtureTest {

  static TestDatabase db;

  @BeforeAll
  static void setUp() {
    db = TestDatabase.start();
    EngineFixture.setUpSchemas(db);
    EngineFixture.setUpSchemas(db); // idempotent
  }

  @AfterAll
  static void tearDown() {
    if (db != null) {
      db.close();
    }
  }

  @Test
  void workflowRunsHasTheColumnsRecoveryReads() throws SQLException {
    Set<String> columns =
        strings(
            "SELECT column_name FROM information_schema.columns"
                + " WHERE table_schema = 'workflow' AND table_name = 'workflow_runs'");
    for (String c : List.of("id", "status", "name", "created_at", "updated_at")) {
      assertTrue(columns.contains(c), "workflow.workflow_runs lacks " + c + ": " + columns);
    }
  }

  @Test
  void theEngineTablesExist() throws SQLException {
    Set<String> tables =
        strings("SELECT table_name FROM information_schema.tables WHERE table_schema = 'workflow'");
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
  void theQueueCanTakeJobsAndUnlockWorkers() throws SQLException {
    Set<String> functions =
        strings(
            "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
                + " WHERE n.nspname = 'graphile_worker'");
    assertTrue(functions.contains("add_job"), "no graphile_worker.add_job: " + functions);
    assertTrue(
        functions.contains("force_unlock_workers"),
        "no graphile_worker.force_unlock_workers: " + functions);
    Set<String> relations =
        strings(
            "SELECT table_name FROM information_schema.tables"
                + " WHERE table_schema = 'graphile_worker'");
    assertTrue(relations.contains("jobs"), "no graphile_worker.jobs: " + relations);
    assertTrue(
        relations.contains("_private_jobs"), "no graphile_worker._private_jobs: " + relations);
  }

  @Test
  void aJobAddedThroughTheQueueIsStored() throws SQLException {
    try (Connection c = db.connect();
        PreparedStatement s =
            c.prepareStatement(
                "SELECT (graphile_worker.add_job('fixture_probe', '{}'::json,"
                    + " job_key := 'fixture-probe')).id")) {
      s.executeQuery().close();
    }
    assertEquals(
        Set.of("fixture_probe"),
        strings(
            "SELECT t.identifier FROM graphile_worker._private_jobs j"
                + " JOIN graphile_worker._private_tasks t ON t.id = j.task_id"
                + " WHERE j.key = 'fixture-probe'"));
  }

  @Test
  void theJdbcUrlBecomesAnEncodedPostgresUrl() {
    assertEquals(
        "postgres://us%40er:p%3Aw%2Fd%20x@localhost:5433/app",
        EngineFixture.postgresUrl(
            "jdbc:postgresql://localhost:5433/app?loggerLevel=OFF", "us@er", "p:w/d x"));
  }

  private static Set<String> strings(String sql) throws SQLException {
    Set<String> out = new HashSet<>();
    try (Connection c = db.connect();
        PreparedStatement s = c.prepareStatement(sql);
        ResultSet rs = s.executeQuery()) {
      while (rs.next()) {
        out.add(rs.getString(1));
      }
    }
    return out;
  }
}
