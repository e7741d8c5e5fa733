package dev.rollcall.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Base64;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** Every seeded run state, on each engine version's real schema: the rows are there. */
class EngineRunsTest {

  static final Map<EngineVersion, TestDatabase> DBS = new EnumMap<>(EngineVersion.class);

  @BeforeAll
  static void setUp() {
    for (EngineVersion v : EngineVersion.values()) {
      TestDatabase db = TestDatabase.start();
      DBS.put(v, db);
      EngineFixture.setUpSchemas(db, v);
    }
  }

  @AfterAll
  static void tearDown() {
    DBS.values().forEach(TestDatabase::close);
    DBS.clear();
  }

  private static EngineRuns runs(EngineVersion v) {
    return EngineRuns.on(DBS.get(v), v);
  }

  @ParameterizedTest
  @EnumSource(EngineVersion.class)
  void pending(EngineVersion v) throws SQLException {
    String id = runs(v).pending();
    assertTrue(id.matches("wrun_[0-9A-HJKMNP-TV-Z]{26}"), id);
    assertEquals(
        List.of("pending", "postgres", EngineRuns.DEFAULT_WORKFLOW, "" + v.specVersion(), "false"),
        row(
            v,
            "SELECT status::text, deployment_id, name, spec_version,"
                + " (started_at IS NOT NULL)::text FROM workflow.workflow_runs WHERE id = ?",
            id));
    assertEquals(List.of("run_created:"), events(v, id));
    assertEquals(0, jobs(v, id));
  }

  @ParameterizedTest
  @EnumSource(EngineVersion.class)
  void midStep(EngineVersion v) throws SQLException {
    String id = runs(v).midStep();
    assertEquals("running", status(v, id));
    List<String> step =
        row(
            v,
            "SELECT step_id, status::text, attempt::text, (started_at IS NOT NULL)::text,"
                + " step_name FROM workflow.workflow_steps WHERE run_id = ?",
            id);
    assertEquals(List.of("running", "1", "true", EngineRuns.STEP_NAME), step.subList(1, 5));
    String stepId = step.get(0);
    assertEquals(
        List.of("run_created:", "run_started:", "step_created:" + stepId, "step_started:" + stepId),
        events(v, id));
    assertEquals(0, jobs(v, id));
  }

  @ParameterizedTest
  @EnumSource(EngineVersion.class)
  void midStepLockedBy(EngineVersion v) throws Exception {
    String id = runs(v).midStepLockedBy("worker-dead");
    String stepId =
        one(
            v,
            "SELECT step_id FROM workflow.workflow_steps WHERE run_id = ? AND status = 'running'",
            id);
    if (v.hasStepTask()) {
      List<String> job =
          row(
              v,
              "SELECT t.identifier, j.locked_by, j.attempts::text, j.payload->>'id',"
                  + " j.payload->>'data' FROM graphile_worker._private_jobs j"
                  + " JOIN graphile_worker._private_tasks t ON t.id = j.task_id"
                  + " WHERE convert_from(decode(j.payload->>'data', 'base64'), 'UTF8')::json"
                  + "->>'workflowRunId' = ?",
              id);
      assertEquals(
          List.of("workflow_steps", "worker-dead", "1", EngineRuns.STEP_NAME), job.subList(0, 4));
      JsonNode body = Api.JSON.readTree(Base64.getDecoder().decode(job.get(4)));
      assertEquals(id, body.get("workflowRunId").asText());
      assertEquals(stepId, body.get("stepId").asText());
    } else {
      List<String> job = flowsJob(v, id);
      assertEquals(List.of("workflow_flows", "worker-dead", "1"), job.subList(0, 3));
      String messageId = job.get(3);
      JsonNode started = decodedPayloads(v, id, "step_started").get(0);
      assertEquals(messageId, started.path("ownerMessageId").asText(), started.toString());
      assertEquals(
          List.of(
              "run_created:", "run_started:", "step_created:" + stepId, "step_started:" + stepId),
          events(v, id));
    }
  }

  @ParameterizedTest
  @EnumSource(EngineVersion.class)
  void dueWait(EngineVersion v) throws SQLException {
    String id = runs(v).dueWait();
    assertEquals("running", status(v, id));
    List<String> wait =
        row(
            v,
            "SELECT wait_id, status::text,"
                + " (resume_at < (now() AT TIME ZONE 'UTC'))::text FROM workflow.workflow_waits"
                + " WHERE run_id = ?",
            id);
    assertTrue(wait.get(0).startsWith(id + "-wait_"), wait.get(0));
    assertEquals(List.of("waiting", "true"), wait.subList(1, 3));
    String correlation = wait.get(0).substring(id.length() + 1);
    assertEquals(
        List.of("run_created:", "run_started:", "wait_created:" + correlation), events(v, id));
    assertEquals(0, jobs(v, id));
  }

  @ParameterizedTest
  @EnumSource(EngineVersion.class)
  void futureWaitWithJob(EngineVersion v) throws SQLException {
    String id = runs(v).futureWaitWithJob();
    LocalDateTime resumeAt = resumeAt(v, id);
    Instant resume = resumeAt.toInstant(ZoneOffset.UTC);
    Duration ahead = Duration.between(Instant.now(), resume);
    assertTrue(ahead.compareTo(Duration.ofMinutes(59)) > 0, ahead.toString());
    List<String> job = flowsJob(v, id);
    assertEquals(List.of("workflow_flows", "-", "0"), job.subList(0, 3));
    String messageId = job.get(3);
    assertEquals(
        EngineRuns.flowsPayload(messageId, EngineRuns.DEFAULT_WORKFLOW, id, 2), job.get(4));
    assertEquals(messageId, job.get(5));
    assertEquals(resume, Instant.parse(job.get(6)));
    // The wait_created event carries the same instant, as cbor-x writes a Date.
    JsonNode created = decodedPayloads(v, id, "wait_created").get(0);
    assertEquals(resume, Instant.parse(created.path("resumeAt").asText()));
  }

  @ParameterizedTest
  @EnumSource(EngineVersion.class)
  void futureWaitLostJob(EngineVersion v) throws SQLException {
    String id = runs(v).futureWaitLostJob();
    assertTrue(resumeAt(v, id).isAfter(LocalDateTime.now(ZoneOffset.UTC).plusMinutes(59)));
    assertEquals(0, jobs(v, id));
  }

  @ParameterizedTest
  @EnumSource(EngineVersion.class)
  void hookParked(EngineVersion v) throws SQLException {
    for (boolean received : new boolean[] {false, true}) {
      String id = runs(v).hookParked(received);
      assertEquals("running", status(v, id));
      List<String> hook =
          row(
              v,
              "SELECT hook_id, owner_id || project_id || environment, is_webhook::text"
                  + " FROM workflow.workflow_hooks WHERE run_id = ?",
              id);
      assertEquals(List.of("", "false"), hook.subList(1, 3));
      List<String> expected = new ArrayList<>(List.of("run_created:", "run_started:"));
      expected.add("hook_created:" + hook.get(0));
      if (received) {
        expected.add("hook_received:" + hook.get(0));
      }
      assertEquals(expected, events(v, id));
      assertEquals(0, jobs(v, id));
    }
  }

  @ParameterizedTest
  @EnumSource(EngineVersion.class)
  void lostWakeUp(EngineVersion v) throws SQLException {
    String id = runs(v).lostWakeUp();
    assertEquals("running", status(v, id));
    assertEquals(
        List.of("completed"),
        column(v, "SELECT status::text FROM workflow.workflow_steps WHERE run_id = ?", id));
    assertEquals(0, count(v, "SELECT count(*) FROM workflow.workflow_waits WHERE run_id = ?", id));
    assertEquals(0, count(v, "SELECT count(*) FROM workflow.workflow_hooks WHERE run_id = ?", id));
    assertEquals(0, jobs(v, id));
    List<String> events = events(v, id);
    assertEquals("step_completed", events.get(events.size() - 1).split(":")[0]);
  }

  @ParameterizedTest
  @EnumSource(EngineVersion.class)
  void terminal(EngineVersion v) throws SQLException {
    for (String status : List.of("completed", "failed", "cancelled")) {
      String id = runs(v).terminal(status);
      assertEquals(
          List.of(status, "true", "true"),
          row(
              v,
              "SELECT status::text, (completed_at IS NOT NULL)::text,"
                  + " (completed_at >= started_at)::text FROM workflow.workflow_runs WHERE id = ?",
              id));
      List<String> events = events(v, id);
      assertEquals("run_" + status + ":", events.get(events.size() - 1));
      assertEquals(0, jobs(v, id));
    }
  }

  @ParameterizedTest
  @EnumSource(EngineVersion.class)
  void queuedJobLockedBy(EngineVersion v) throws SQLException {
    String id = runs(v).queuedJobLockedBy("worker-7");
    assertEquals("running", status(v, id));
    assertEquals(
        0,
        count(
            v,
            "SELECT count(*) FROM workflow.workflow_steps WHERE run_id = ?"
                + " AND status NOT IN ('completed', 'failed', 'cancelled')",
            id));
    assertEquals(List.of("workflow_flows", "worker-7", "1"), flowsJob(v, id).subList(0, 3));
  }

  @ParameterizedTest
  @EnumSource(EngineVersion.class)
  void exhaustedJob(EngineVersion v) throws SQLException {
    String id = runs(v).exhaustedJob();
    String messageId = flowsJob(v, id).get(3);
    assertEquals(
        List.of("3", "3", "false", "true", "-"),
        row(
            v,
            "SELECT attempts::text, max_attempts::text, is_available::text,"
                + " (last_error IS NOT NULL)::text, coalesce(locked_by, '-')"
                + " FROM graphile_worker._private_jobs WHERE key = ?",
            messageId));
  }

  @ParameterizedTest
  @EnumSource(EngineVersion.class)
  void unlockedQueuedJob(EngineVersion v) throws SQLException {
    String id = runs(v).unlockedQueuedJob();
    List<String> job = flowsJob(v, id);
    assertEquals(List.of("workflow_flows", "-", "0"), job.subList(0, 3));
    assertEquals(
        List.of("true", "true"),
        row(
            v,
            "SELECT is_available::text, (run_at <= now())::text"
                + " FROM graphile_worker._private_jobs WHERE key = ?",
            job.get(3)));
  }

  @ParameterizedTest
  @EnumSource(EngineVersion.class)
  void withJobPrefix(EngineVersion v) throws SQLException {
    String id = runs(v).withJobPrefix("acme_").unlockedQueuedJob();
    assertEquals("acme_flows", flowsJob(v, id).get(0));
  }

  @Test
  void inSchema() throws SQLException {
    EngineVersion v = EngineVersion.STABLE;
    List<String> statements = new ArrayList<>(List.of("CREATE SCHEMA IF NOT EXISTS wf_copy"));
    for (String t :
        List.of(
            "workflow_runs",
            "workflow_events",
            "workflow_steps",
            "workflow_hooks",
            "workflow_waits")) {
      statements.add(
          "CREATE TABLE IF NOT EXISTS wf_copy." + t + " (LIKE workflow." + t + " INCLUDING ALL)");
    }
    DBS.get(v).execute(statements.toArray(String[]::new));
    String id = runs(v).inSchema("wf_copy").dueWait();
    assertEquals(1, count(v, "SELECT count(*) FROM wf_copy.workflow_waits WHERE run_id = ?", id));
    assertEquals(0, count(v, "SELECT count(*) FROM workflow.workflow_runs WHERE id = ?", id));
  }

  @ParameterizedTest
  @EnumSource(EngineVersion.class)
  void idsSortInCreationOrder(EngineVersion v) throws SQLException {
    EngineRuns runs = runs(v);
    List<String> ids = new ArrayList<>();
    for (int i = 0; i < 20; i++) {
      ids.add(i % 2 == 0 ? runs.pending() : runs.lostWakeUp());
    }
    List<String> sorted = new ArrayList<>(ids);
    sorted.sort(null);
    assertEquals(ids, sorted);
    List<String> byCreation =
        column(
            v,
            "SELECT id FROM workflow.workflow_runs WHERE id = ANY(?) ORDER BY created_at, id",
            (Object) ids.toArray(String[]::new));
    assertEquals(ids, byCreation);
  }

  /**
   * Every CBOR value a seeded run holds is what the engine's cbor-x writes: decoding it with the
   * installed cbor-x and encoding the result again gives the same bytes.
   */
  @ParameterizedTest
  @EnumSource(EngineVersion.class)
  void cborIsByteForByteWhatTheEnginesCborXWrites(EngineVersion v) throws SQLException {
    EngineRuns runs = runs(v);
    List<String> ids =
        List.of(
            runs.terminal("completed"),
            runs.terminal("failed"),
            runs.futureWaitWithJob(),
            runs.hookParked(true),
            runs.midStepLockedBy("w"));
    List<String> hex =
        column(
            v,
            "SELECT encode(b, 'hex') FROM ("
                + " SELECT payload_cbor AS b FROM workflow.workflow_events WHERE run_id = ANY(?)"
                + " UNION ALL SELECT input_cbor FROM workflow.workflow_runs WHERE id = ANY(?)"
                + " UNION ALL SELECT output_cbor FROM workflow.workflow_runs WHERE id = ANY(?)"
                + " UNION ALL SELECT error_cbor FROM workflow.workflow_runs WHERE id = ANY(?)"
                + " UNION ALL SELECT input_cbor FROM workflow.workflow_steps WHERE run_id = ANY(?)"
                + " UNION ALL SELECT output_cbor FROM workflow.workflow_steps WHERE run_id = ANY(?)"
                + ") q WHERE b IS NOT NULL",
            array(ids),
            array(ids),
            array(ids),
            array(ids),
            array(ids),
            array(ids));
    assertTrue(hex.size() > 20, hex.toString());
    for (JsonNode decoded : cborX(v, hex)) {
      assertTrue(decoded.path("same").asBoolean(), decoded.toString());
    }
  }

  /**
   * The engine's own storage reads every seeded state back (its zod schemas parse each run, event,
   * step and hook) and lists the active ones as {@code reenqueueActiveRuns} does.
   */
  @ParameterizedTest
  @EnumSource(EngineVersion.class)
  void theEnginesOwnStorageReadsEverySeededRun(EngineVersion v) throws Exception {
    EngineRuns runs = runs(v).named("flowRead" + v.ordinal());
    Map<String, String> expected = new java.util.LinkedHashMap<>();
    expected.put(runs.pending(), "pending");
    expected.put(runs.midStep(), "running");
    expected.put(runs.midStepLockedBy("w"), "running");
    expected.put(runs.dueWait(), "running");
    expected.put(runs.futureWaitWithJob(), "running");
    expected.put(runs.futureWaitLostJob(), "running");
    expected.put(runs.hookParked(false), "running");
    expected.put(runs.hookParked(true), "running");
    expected.put(runs.lostWakeUp(), "running");
    expected.put(runs.terminal("completed"), "completed");
    expected.put(runs.terminal("failed"), "failed");
    expected.put(runs.terminal("cancelled"), "cancelled");
    expected.put(runs.queuedJobLockedBy("w"), "running");
    expected.put(runs.exhaustedJob(), "running");
    expected.put(runs.unlockedQueuedJob(), "running");
    JsonNode read = engineRead(v, runs.workflowName(), List.copyOf(expected.keySet()));
    for (Map.Entry<String, String> e : expected.entrySet()) {
      JsonNode run = read.path("runs").path(e.getKey());
      assertEquals(e.getValue(), run.path("status").asText(), e.getKey() + ": " + run);
      assertEquals(
          events(v, e.getKey()).stream().map(t -> t.split(":")[0]).toList(),
          Api.JSON.convertValue(run.path("events"), List.class),
          e.getKey() + ": " + run);
    }
    List<String> active =
        expected.entrySet().stream()
            .filter(e -> Set.of("pending", "running").contains(e.getValue()))
            .map(Map.Entry::getKey)
            .sorted()
            .toList();
    List<String> listed = new ArrayList<>();
    read.path("active").forEach(n -> listed.add(n.asText()));
    listed.sort(null);
    assertEquals(active, listed);
  }

  // ------------------------------------------------------------------ helpers

  /** The run's events, {@code type:correlationId}, in id order. */
  private static List<String> events(EngineVersion v, String runId) throws SQLException {
    return column(
        v,
        "SELECT type || ':' || coalesce(correlation_id, '') FROM workflow.workflow_events"
            + " WHERE run_id = ? ORDER BY id",
        runId);
  }

  private static String status(EngineVersion v, String runId) throws SQLException {
    return one(v, "SELECT status::text FROM workflow.workflow_runs WHERE id = ?", runId);
  }

  private static LocalDateTime resumeAt(EngineVersion v, String runId) throws SQLException {
    try (Connection c = DBS.get(v).connect();
        PreparedStatement s =
            c.prepareStatement("SELECT resume_at FROM workflow.workflow_waits WHERE run_id = ?")) {
      s.setString(1, runId);
      try (ResultSet rs = s.executeQuery()) {
        assertTrue(rs.next());
        return rs.getObject(1, LocalDateTime.class);
      }
    }
  }

  /** The run's jobs: those whose message body names it. */
  private static long jobs(EngineVersion v, String runId) throws SQLException {
    return count(
        v,
        "SELECT count(*) FROM graphile_worker._private_jobs"
            + " WHERE convert_from(decode(payload->>'data', 'base64'), 'UTF8')::json->>'runId' = ?"
            + " OR convert_from(decode(payload->>'data', 'base64'), 'UTF8')::json->>'workflowRunId'"
            + " = ?",
        runId,
        runId);
  }

  /**
   * The run's workflow-message job: task, locked_by (or -), attempts, key, payload, payload's
   * messageId, run_at (ISO instant).
   */
  private static List<String> flowsJob(EngineVersion v, String runId) throws SQLException {
    return row(
        v,
        "SELECT t.identifier, coalesce(j.locked_by, '-'), j.attempts::text, j.key,"
            + " j.payload::text, j.payload->>'messageId',"
            + " to_char(j.run_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"
            + " FROM graphile_worker._private_jobs j"
            + " JOIN graphile_worker._private_tasks t ON t.id = j.task_id"
            + " WHERE t.identifier LIKE '%flows'"
            + " AND convert_from(decode(j.payload->>'data', 'base64'), 'UTF8')::json->>'runId' = ?",
        runId);
  }

  /** The decoded payloads of a run's events of one type, through the engine's cbor-x. */
  private static List<JsonNode> decodedPayloads(EngineVersion v, String runId, String type)
      throws SQLException {
    List<String> hex =
        column(
            v,
            "SELECT encode(payload_cbor, 'hex') FROM workflow.workflow_events"
                + " WHERE run_id = ? AND type = ? ORDER BY id",
            runId,
            type);
    return cborX(v, hex).stream().map(n -> n.get("value")).toList();
  }

  private static final String ENGINE_READ =
      "import { createWorld } from '@workflow/world-postgres';\n"
          + "import { readFileSync } from 'node:fs';\n"
          + "const [name, ...ids] = readFileSync(0, 'utf8').split('\\n').filter(Boolean);\n"
          + "const world = createWorld();\n"
          + "const out = { runs: {}, active: [] };\n"
          + "try {\n"
          + "  for (const runId of ids) {\n"
          + "    const run = await world.runs.get(runId);\n"
          + "    const events = await world.events.list({ runId, pagination: {} });\n"
          + "    const steps = await world.steps.list({ runId, pagination: {} });\n"
          + "    const hooks = await world.hooks.list({ runId, pagination: {} });\n"
          + "    out.runs[runId] = { status: run.status, events: events.data.map((e) => e.eventType),\n"
          + "      steps: steps.data.map((s) => s.status), hooks: hooks.data.length };\n"
          + "  }\n"
          + "  for (const status of ['pending', 'running']) {\n"
          + "    const page = await world.runs.list({ status, workflowName: name,\n"
          + "      resolveData: 'none', pagination: { limit: 1000 } });\n"
          + "    out.active.push(...page.data.map((r) => r.runId));\n"
          + "  }\n"
          + "} finally {\n"
          + "  await world.close();\n"
          + "}\n"
          + "console.log(JSON.stringify(out));\n";

  /** Reads runs back with the installed engine's storage API. */
  private static JsonNode engineRead(EngineVersion v, String workflowName, List<String> ids)
      throws Exception {
    ProcessBuilder pb =
        new ProcessBuilder(
                EngineFixture.executable("node"), "--input-type=module", "-e", ENGINE_READ)
            .directory(EngineFixture.install(v).toFile())
            .redirectErrorStream(true);
    pb.environment().put("WORKFLOW_POSTGRES_URL", EngineFixture.postgresUrl(DBS.get(v)));
    Process p = pb.start();
    List<String> input = new ArrayList<>();
    input.add(workflowName);
    input.addAll(ids);
    p.getOutputStream().write(String.join("\n", input).getBytes(StandardCharsets.UTF_8));
    p.getOutputStream().close();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(p.waitFor(60, TimeUnit.SECONDS), "node did not finish");
    assertEquals(0, p.exitValue(), out);
    String last = out.lines().reduce((a, b) -> b).orElse("");
    return Api.JSON.readTree(last);
  }

  private static final String CBOR_X_CHECK =
      "import { decode, encode } from 'cbor-x';\n"
          + "import { readFileSync } from 'node:fs';\n"
          + "for (const hex of readFileSync(0, 'utf8').split('\\n').filter(Boolean)) {\n"
          + "  const value = decode(Buffer.from(hex, 'hex'));\n"
          + "  const same = Buffer.from(encode(value)).toString('hex') === hex;\n"
          + "  console.log(JSON.stringify({ same, value }, (k, v) =>\n"
          + "    v instanceof Uint8Array ? { bytes: Buffer.from(v).toString('utf8') } : v));\n"
          + "}\n";

  /** Decodes CBOR with the installed engine's cbor-x; each: {same, value}. */
  private static List<JsonNode> cborX(EngineVersion v, List<String> hex) {
    try {
      Process p =
          new ProcessBuilder(
                  EngineFixture.executable("node"), "--input-type=module", "-e", CBOR_X_CHECK)
              .directory(EngineFixture.install(v).toFile())
              .redirectErrorStream(true)
              .start();
      p.getOutputStream().write(String.join("\n", hex).getBytes(StandardCharsets.UTF_8));
      p.getOutputStream().close();
      String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      assertTrue(p.waitFor(60, TimeUnit.SECONDS), "node did not finish");
      assertEquals(0, p.exitValue(), out);
      List<JsonNode> nodes = new ArrayList<>();
      for (String line : out.lines().toList()) {
        nodes.add(Api.JSON.readTree(line));
      }
      assertEquals(hex.size(), nodes.size(), out);
      return nodes;
    } catch (IOException e) {
      throw new IllegalStateException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  private static Object array(List<String> values) {
    return values.toArray(String[]::new);
  }

  private static String one(EngineVersion v, String sql, Object... params) throws SQLException {
    List<String> values = column(v, sql, params);
    assertEquals(1, values.size(), sql + " " + values);
    return values.get(0);
  }

  private static long count(EngineVersion v, String sql, Object... params) throws SQLException {
    return Long.parseLong(one(v, sql, params));
  }

  private static List<String> column(EngineVersion v, String sql, Object... params) {
    return DBS.get(v).column(sql, params);
  }

  private static List<String> row(EngineVersion v, String sql, Object... params) {
    return DBS.get(v).row(sql, params);
  }
}
