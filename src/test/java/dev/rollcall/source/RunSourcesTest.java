package dev.rollcall.source;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.config.RollcallConfig;
import io.quarkus.runtime.configuration.DurationConverter;
import io.smallrye.config.SmallRyeConfig;
import io.smallrye.config.SmallRyeConfigBuilder;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

@Tag("unit")
class RunSourcesTest {

  static RunSources sources(Map<String, String> properties) {
    SmallRyeConfig config =
        new SmallRyeConfigBuilder()
            .withMapping(RollcallConfig.class)
            .withConverter(Duration.class, 100, new DurationConverter())
            .withDefaultValues(properties)
            .build();
    return new RunSources(config.getConfigMapping(RollcallConfig.class));
  }

  static Map<String, String> worldPostgres(String extraKey, String extraValue) {
    return Map.of(
        "rollcall.namespaces.\"shop\".registration-secret",
        "s",
        "rollcall.namespaces.\"shop\".source.kind",
        "world-postgres",
        extraKey,
        extraValue);
  }

  @Test
  void theWorldPostgresPresetRoutesToTheEnginesQueueNames() {
    RunSource plain = sources(worldPostgres("rollcall.admin.token", "t")).get("shop");
    assertEquals("__wkf_workflow_checkout", plain.queueName("checkout"));
    assertEquals("\"workflow\".\"workflow_runs\"", plain.describe());
    assertTrue(plain.isPending(new ScannedRun("wrun_1", "checkout", "pending", false)));
    assertFalse(plain.isPending(new ScannedRun("wrun_1", "checkout", "running", false)));

    RunSource topic =
        sources(worldPostgres("rollcall.namespaces.\"shop\".source.topic-namespace", "acme"))
            .get("shop");
    assertEquals("__acme_wkf_workflow_checkout", topic.queueName("checkout"));

    RunSource schema =
        sources(worldPostgres("rollcall.namespaces.\"shop\".source.schema", "wf2")).get("shop");
    assertEquals("\"wf2\".\"workflow_runs\"", schema.describe());
  }

  @Test
  void aTopicNamespaceTheEngineWouldRejectStopsTheService() {
    IllegalStateException e =
        assertThrows(
            IllegalStateException.class,
            () ->
                sources(
                    worldPostgres(
                        "rollcall.namespaces.\"shop\".source.topic-namespace", "Acme-1")));
    assertTrue(e.getMessage().contains("topic-namespace"), e.getMessage());
  }

  @Test
  void aTableSourceNamesEveryMissingKey() {
    IllegalStateException e =
        assertThrows(
            IllegalStateException.class,
            () ->
                sources(
                    Map.of(
                        "rollcall.namespaces.\"app\".registration-secret", "s",
                        "rollcall.namespaces.\"app\".source.kind", "table",
                        "rollcall.namespaces.\"app\".source.schema", "public")));
    assertTrue(e.getMessage().contains("rollcall.namespaces.\"app\".source"), e.getMessage());
    assertTrue(
        e.getMessage()
            .endsWith(
                "requires table, id-column, status-column, name-column, active-statuses,"
                    + " queue-name-template"),
        e.getMessage());
  }

  @Test
  void anUnknownNamespaceIsATypedRefusal() {
    RunSources none = sources(Map.of("rollcall.admin.token", "t"));
    assertThrows(dev.rollcall.error.Problems.UnknownNamespace.class, () -> none.get("missing"));
  }
}
