package dev.rollcall.model;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.testing.ServiceProcess;
import dev.rollcall.testing.SourceTables;
import dev.rollcall.testing.TestDatabase;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Flyway owns the schema and Hibernate only validates the entities against it at boot: the packaged
 * service comes up on the schema it migrated, and a schema that drifted from an entity stops it
 * before it serves anything, naming the column.
 */
@Tag("slow")
class SchemaValidationIT {

  @Test
  void aColumnAnEntityMapsThatTheSchemaLacksStopsTheServiceAtBoot() throws Exception {
    try (TestDatabase db = TestDatabase.start()) {
      SourceTables.create(db);
      Map<String, String> settings = new HashMap<>(SourceTables.namespaceSettings());
      // Only the table namespaces: this test needs no engine schema.
      settings.keySet().removeIf(k -> k.startsWith("rollcall.namespaces.\"" + SourceTables.ENGINE));
      try (ServiceProcess migrated = ServiceProcess.start("schema-validated", db, settings)) {
        // Up and ready: Flyway migrated the schema and Hibernate found every mapping in it.
      }
      Path log = Path.of("target", "it-logs", "schema-drifted.log");
      Files.deleteIfExists(log);
      db.execute("ALTER TABLE rollcall.instances RENAME COLUMN end_reason TO end_reason_drifted");
      try {
        IllegalStateException refused =
            assertThrows(
                IllegalStateException.class,
                () -> ServiceProcess.start("schema-drifted", db, settings).close());

        assertTrue(refused.getMessage().contains("exited"), refused.getMessage());

        String output = Files.readString(log);
        assertTrue(
            output.contains("missing column [end_reason]"),
            "the refusal names the missing column: " + log.toAbsolutePath());
      } finally {
        db.execute("ALTER TABLE rollcall.instances RENAME COLUMN end_reason_drifted TO end_reason");
      }
    }
  }
}
