package dev.rollcall.health;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.config.RollcallConfig;
import dev.rollcall.database.Databases;
import dev.rollcall.source.ActiveIndexes;
import dev.rollcall.source.RunSources;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.Poll;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import io.quarkus.runtime.configuration.DurationConverter;
import io.smallrye.config.SmallRyeConfigBuilder;
import io.vertx.mutiny.sqlclient.Pool;
import jakarta.inject.Inject;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Engine namespaces sharing one database, and the opt-in partial index. */
@ServiceTest
class NamespaceIsolationTest {

  @Inject Pool pool;
  @Inject ActiveIndexes indexes;

  /** Until a CREATE INDEX is waiting for a lock in the database. */
  static void waitUntilWaiting() {
    Poll.until(
        "the index build waits for a lock",
        Duration.ofSeconds(5),
        () ->
            Db.number(
                    "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'CREATE INDEX%'"
                        + " AND wait_event_type = 'Lock'")
                > 0);
  }

  static RunSources engines(Map<String, String> extra) {
    Map<String, String> p = new HashMap<>(extra);
    for (String ns : new String[] {"shop", "billing"}) {
      p.put("rollcall.namespaces.\"" + ns + "\".registration-secret", "s");
      p.put("rollcall.namespaces.\"" + ns + "\".source.kind", "world-postgres");
    }
    return new RunSources(
        new SmallRyeConfigBuilder()
            .withMapping(RollcallConfig.class)
            .withConverter(Duration.class, 100, new DurationConverter())
            .withDefaultValues(p)
            .build()
            .getConfigMapping(RollcallConfig.class));
  }

  @Test
  void namespacesWhoseRunsCannotBeToldApartAreReportedAsAWarning() {
    // The engine keeps no job prefix on its runs: two namespaces in one schema share every run.
    RunSources shared =
        engines(Map.of("rollcall.namespaces.\"billing\".source.job-prefix", "billing_"));

    Map<String, String> warnings =
        new SourcesReadiness(Databases.single(pool, List.of("shop", "billing")), shared)
            .ambiguities()
            .await()
            .indefinitely();

    assertEquals(2, warnings.size(), warnings.toString());
    assertTrue(warnings.get("shop").contains("no job_prefix column"), warnings.get("shop"));
  }

  @Test
  void anEngineUpgradeThatAddsTheJobPrefixColumnIsSeenByTheNextSnapshotWithoutARestart() {
    Db.update("DROP SCHEMA IF EXISTS upgrade_workflow CASCADE");
    Db.update("CREATE SCHEMA upgrade_workflow");
    Db.update(
        "CREATE TABLE upgrade_workflow.workflow_runs (id text PRIMARY KEY, name text,"
            + " status text, created_at timestamptz DEFAULT now(),"
            + " updated_at timestamptz DEFAULT now())");
    Db.update(
        "INSERT INTO upgrade_workflow.workflow_runs (id, name, status) VALUES ('r1', 'w', 'pending')");
    var source =
        engines(Map.of("rollcall.namespaces.\"shop\".source.schema", "upgrade_workflow"))
            .get("shop");
    assertEquals("r1", source.snapshot(pool).await().indefinitely().maxRunId());

    // The engine is upgraded while the service runs: its runs now carry their job prefix, and a
    // namespace with another prefix writes into the same table.
    Db.update("ALTER TABLE upgrade_workflow.workflow_runs ADD COLUMN job_prefix text");
    Db.update("UPDATE upgrade_workflow.workflow_runs SET job_prefix = 'workflow_'");
    Db.update(
        "INSERT INTO upgrade_workflow.workflow_runs (id, name, status, job_prefix)"
            + " VALUES ('r2', 'w', 'pending', 'other_')");

    assertEquals("r1", source.snapshot(pool).await().indefinitely().maxRunId());
    Db.update("DROP SCHEMA upgrade_workflow CASCADE");
  }

  @Test
  void namespacesInTheirOwnSchemasAreNotAmbiguous() {
    RunSources apart =
        engines(Map.of("rollcall.namespaces.\"billing\".source.schema", "billing_workflow"));

    assertEquals(
        Map.of(),
        new SourcesReadiness(Databases.single(pool, List.of("shop", "billing")), apart)
            .ambiguities()
            .await()
            .indefinitely());
  }

  @Test
  void theOptInActiveIndexIsCreatedConcurrentlyAndServesTheScansPredicate() {
    String ddl = engines(Map.of()).get("shop").activeIndexDdl().orElseThrow();

    // While the build waits on the engine's open transaction, no thread is held for it: neither
    // the common pool (which the rest of the JVM shares) nor one of the small JDBC pool's.
    java.util.concurrent.CompletableFuture<Void> built;
    try (java.sql.Connection engineTx = Db.database().connect()) {
      engineTx.setAutoCommit(false);
      engineTx.createStatement().execute("LOCK TABLE workflow.workflow_runs IN SHARE MODE");
      // Built in the database of a configured namespace over the same engine schema: the engine's.
      built = indexes.create(SourceTables.ENGINE, ddl).subscribeAsCompletionStage();
      waitUntilWaiting();
      assertEquals(0, java.util.concurrent.ForkJoinPool.commonPool().getActiveThreadCount());
      assertEquals(
          List.of(),
          Db.column(
              "SELECT application_name FROM pg_stat_activity WHERE query LIKE 'CREATE INDEX%'"
                  + " AND application_name = 'PostgreSQL JDBC Driver'"));
      assertTrue(!built.isDone());
      engineTx.rollback();
    } catch (java.sql.SQLException e) {
      throw new IllegalStateException(e);
    }
    built.join();

    assertEquals(
        "CREATE INDEX workflow_runs_rollcall_active ON workflow.workflow_runs USING btree (id)"
            + " WHERE (status = ANY (ARRAY['pending'::workflow.status,"
            + " 'running'::workflow.status]))",
        Db.column(
                "SELECT indexdef FROM pg_indexes WHERE schemaname = 'workflow'"
                    + " AND indexname = 'workflow_runs_rollcall_active'")
            .get(0));
    Db.update("DROP INDEX workflow.workflow_runs_rollcall_active");
  }
}
