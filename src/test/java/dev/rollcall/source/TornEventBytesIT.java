package dev.rollcall.source;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.rollcall.testing.Api;
import dev.rollcall.testing.EngineFixture;
import dev.rollcall.testing.EngineVersion;
import dev.rollcall.testing.TestDatabase;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The events Rollcall writes when it rolls a torn step forward are byte for byte the events the
 * engine writes: each supported {@code @workflow/world-postgres} completes (and, on the 5.0 line,
 * fails) a step with its own {@code events.create} and the event data the runtime sends, and the
 * bytes {@link EngineEvents} builds from the step row must equal the engine's {@code payload_cbor}.
 */
@Tag("compat")
class TornEventBytesIT {

  static final Path SCRIPT = Path.of("src", "test", "engine", "scripts", "write-steps.mjs");
  static final String WORKFLOW = "workflow//./workflows/orders//fulfil";

  @ParameterizedTest
  @EnumSource(EngineVersion.class)
  void theEventBuiltFromAStepRowIsTheEventTheEngineWrote(EngineVersion version) throws Exception {
    try (TestDatabase db = TestDatabase.start()) {
      EngineFixture.setUpSchemas(db, version);
      JsonNode written = writeSteps(db, version);
      try (Connection c = db.connect()) {
        Map<String, byte[]> completed = stepAndEvent(c, written.get("completed").asText());
        assertArrayEquals(
            completed.get("event"),
            EngineEvents.stepCompleted(
                new String(completed.get("step_name"), StandardCharsets.UTF_8),
                WORKFLOW,
                completed.get("output_cbor")),
            () -> "engine's: " + HexFormat.of().formatHex(completed.get("event")));
        if (version == EngineVersion.BETA) {
          Map<String, byte[]> failed = stepAndEvent(c, written.get("failed").asText());
          assertTrue(EngineEvents.serializedError(failed.get("error_cbor")));
          assertArrayEquals(
              failed.get("event"),
              EngineEvents.stepFailed(
                  new String(failed.get("step_name"), StandardCharsets.UTF_8),
                  failed.get("error_cbor")));
        }
      }
    }
  }

  static JsonNode writeSteps(TestDatabase db, EngineVersion version) throws Exception {
    Path dir = EngineFixture.install(version);
    Path log = Files.createTempFile(dir, "write-steps-", ".log");
    int exit =
        EngineFixture.run(
            dir,
            List.of(EngineFixture.executable("node"), SCRIPT.toAbsolutePath().toString(), WORKFLOW),
            Map.of("WORKFLOW_POSTGRES_URL", EngineFixture.postgresUrl(db)),
            log,
            2);
    String output = Files.readString(log, StandardCharsets.UTF_8);
    String last = output.lines().reduce((a, b) -> b).orElse("");
    assertEquals(0, exit, output);
    return Api.JSON.readTree(last);
  }

  /** The run's one step row's name and bytes, and its terminal event's data. */
  static Map<String, byte[]> stepAndEvent(Connection c, String runId) throws Exception {
    try (PreparedStatement s =
        c.prepareStatement(
            "SELECT s.step_name, s.output_cbor, s.error_cbor, e.payload_cbor"
                + " FROM workflow.workflow_steps s JOIN workflow.workflow_events e"
                + " ON e.correlation_id = s.step_id AND e.run_id = s.run_id"
                + " AND e.type IN ('step_completed', 'step_failed') WHERE s.run_id = ?")) {
      s.setString(1, runId);
      try (ResultSet rs = s.executeQuery()) {
        assertTrue(rs.next(), "no terminal step event of " + runId);
        return Map.of(
            "step_name",
            rs.getString(1).getBytes(StandardCharsets.UTF_8),
            "output_cbor",
            rs.getBytes(2) == null ? new byte[0] : rs.getBytes(2),
            "error_cbor",
            rs.getBytes(3) == null ? new byte[0] : rs.getBytes(3),
            "event",
            rs.getBytes(4));
      }
    }
  }
}
