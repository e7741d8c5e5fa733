package dev.rollcall.health;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.rollcall.testing.Api;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import io.quarkus.test.common.http.TestHTTPResource;
import java.net.URI;
import java.util.HashMap;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.Test;

@ServiceTest
class HealthTest extends ApiTestBase {

  /** The management interface's root, {@code /q/}. */
  @TestHTTPResource(value = "/", management = true)
  URI management;

  Map<String, JsonNode> checks(String path) {
    Api.Reply r = new Api(management).send("GET", path, null, null).expect(200);
    assertEquals("UP", r.text("status"));
    Map<String, JsonNode> byName = new HashMap<>();
    r.body().get("checks").forEach(c -> byName.put(c.get("name").asText(), c));
    return byName;
  }

  @Test
  void readinessChecksTheDatabaseTheSchemaAndEveryNamespacesSource() {
    Map<String, JsonNode> checks = checks("health/ready");

    JsonNode sources = checks.get("rollcall-sources");
    assertEquals("UP", sources.get("status").asText());
    assertEquals("readable", sources.get("data").get(SourceTables.LARGE).asText());
    assertEquals("readable", sources.get("data").get(SourceTables.SMALL).asText());
    JsonNode schema = checks.get("rollcall-schema");
    assertEquals("UP", schema.get("status").asText());
    assertEquals(0, schema.get("data").get("pending").asInt());
    // Each database is checked, by name (the default one's figures unprefixed).
    assertEquals(0, schema.get("data").get(SourceTables.SECOND_DATABASE + ".pending").asInt());
    assertEquals("readable", sources.get("data").get(SourceTables.SECOND).asText());
    // Readiness asks each database itself: the default datasource's own check, which would make
    // the replica unready whenever that one database is down, is off.
    assertTrue(
        checks.values().stream().noneMatch(c -> c.get("name").asText().contains("PostgreSQL")),
        checks.keySet().toString());
  }

  @Test
  void readinessIsDownAndClaimsAre503WhileANamespacesSourceCannotBeRead() {
    String table = SourceTables.table(SourceTables.GROWING);
    Db.update("ALTER TABLE " + table + " RENAME TO growing_runs_away");
    try {
      Api.Reply r = new Api(management).send("GET", "health/ready", null, null).expect(503);
      assertEquals("DOWN", r.text("status"));
      JsonNode sources = null;
      for (JsonNode c : r.body().get("checks")) {
        if (c.get("name").asText().equals("rollcall-sources")) {
          sources = c;
        }
      }
      assertEquals("DOWN", sources.get("status").asText());
      String detail = sources.get("data").get(SourceTables.GROWING).asText();
      assertTrue(detail.contains("growing_runs"), detail);
      assertEquals("readable", sources.get("data").get(SourceTables.SMALL).asText());

      Api.Reply claim =
          api.claim(api.register(SourceTables.GROWING, UUID.randomUUID().toString(), "a"), 5);
      claim.expect(503);
      assertEquals("urn:rollcall:problem:source-unavailable", claim.text("type"));
    } finally {
      Db.update("ALTER TABLE " + SourceTables.SCHEMA + ".growing_runs_away RENAME TO growing_runs");
    }
    checks("health/ready");
  }

  @Test
  void livenessAndStartupAreUp() {
    checks("health/live");
    checks("health/started");
  }
}
