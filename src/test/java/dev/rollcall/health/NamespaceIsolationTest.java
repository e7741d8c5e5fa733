package dev.rollcall.health;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.config.RollcallConfig;
import dev.rollcall.source.ActiveIndexes;
import dev.rollcall.source.RunSources;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.ServiceTest;
import io.quarkus.runtime.configuration.DurationConverter;
import io.smallrye.config.SmallRyeConfigBuilder;
import io.vertx.mutiny.sqlclient.Pool;
import jakarta.inject.Inject;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Engine namespaces sharing one database, and the opt-in partial index. */
@ServiceTest
class NamespaceIsolationTest {

  @Inject Pool pool;
  @Inject ActiveIndexes indexes;

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
        new SourcesReadiness(pool, shared).ambiguities().await().indefinitely();

    assertEquals(2, warnings.size(), warnings.toString());
    assertTrue(warnings.get("shop").contains("no job_prefix column"), warnings.get("shop"));
  }

  @Test
  void namespacesInTheirOwnSchemasAreNotAmbiguous() {
    RunSources apart =
        engines(Map.of("rollcall.namespaces.\"billing\".source.schema", "billing_workflow"));

    assertEquals(Map.of(), new SourcesReadiness(pool, apart).ambiguities().await().indefinitely());
  }

  @Test
  void theOptInActiveIndexIsCreatedConcurrentlyAndServesTheScansPredicate() {
    String ddl = engines(Map.of()).get("shop").activeIndexDdl().orElseThrow();

    indexes.create("shop", ddl);

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
