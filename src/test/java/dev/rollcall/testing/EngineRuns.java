package dev.rollcall.testing;

import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.ByteArrayOutputStream;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Types;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.time.temporal.ChronoUnit;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Seeds runs of the engine ({@code @workflow/world-postgres}) in every state that recovery has to
 * tell apart, as rows of the real schemas that {@link EngineFixture#setUpSchemas(TestDatabase,
 * EngineVersion)} built. Every method writes what the engine's storage ({@code dist/storage.js},
 * {@code events.create}) and queue ({@code dist/queue.js}) would have written to reach that state,
 * in one transaction, and returns the run id:
 *
 * <ul>
 *   <li>ids {@code wrun_}/{@code wevt_}/{@code step_}/{@code wait_}/{@code hook_}/{@code msg_} + a
 *       26-character monotonic ULID, so id order is creation order, as the engine's {@code
 *       monotonicFactory()} makes them;
 *   <li>{@code deployment_id} {@code postgres}, {@code spec_version} the version's {@code
 *       SPEC_VERSION_CURRENT}, timestamps as UTC wall time in {@code timestamp without time zone}
 *       (what drizzle writes from a JS {@code Date}, millisecond precision);
 *   <li>event data and entity payloads as the engine's {@code cbor-x} encodes them ({@code
 *       payload_cbor}, {@code input_cbor}, ...), serialized user data as opaque bytes (a {@code
 *       Uint8Array}, CBOR tag 64);
 *   <li>waits {@code <runId>-<correlationId>}, hooks with empty owner, project and environment;
 *       terminal runs without hooks and waits (the engine deletes them);
 *   <li>queue jobs through {@code graphile_worker.add_job} with the engine's payload {@code
 *       {"attempt","messageId","id","data"}} (key order and bytes of {@code
 *       JSON.stringify(MessageData.encode(...))}, {@code data} the base64 of {@code
 *       {"runId":...}}), job key = message id, max attempts 3, on task {@code <jobPrefix>flows}.
 * </ul>
 *
 * <p>Immutable: {@link #withJobPrefix}, {@link #inSchema} and {@link #named} return a new builder.
 */
public final class EngineRuns {

  /** What the engine's queue reports as its deployment id, and so every run's. */
  public static final String DEPLOYMENT_ID = "postgres";

  /** The engine's default job prefix ({@code WORKFLOW_POSTGRES_JOB_PREFIX} unset). */
  public static final String DEFAULT_JOB_PREFIX = "workflow_";

  /** A workflow id as the workflow compiler names workflows. */
  public static final String DEFAULT_WORKFLOW = "workflow//./src/workflows/order//processOrder";

  /** The name of every seeded step, as the workflow compiler names steps. */
  public static final String STEP_NAME = "step//./src/workflows/order//chargeCard";

  /** The engine's {@code maxAttempts} for every job it adds. */
  public static final int MAX_ATTEMPTS = 3;

  /** The queue's schema (graphile-worker's default; the engine does not change it). */
  public static final String QUEUE_SCHEMA = "graphile_worker";

  private final TestDatabase db;
  private final EngineVersion version;
  private final String jobPrefix;
  private final String schema;
  private final String workflowName;

  private EngineRuns(
      TestDatabase db, EngineVersion version, String jobPrefix, String schema, String name) {
    this.db = db;
    this.version = version;
    this.jobPrefix = jobPrefix;
    this.schema = schema;
    this.workflowName = name;
  }

  /** Seeds runs into a database whose schemas the given engine version built. */
  public static EngineRuns on(TestDatabase db, EngineVersion version) {
    return new EngineRuns(db, version, DEFAULT_JOB_PREFIX, "workflow", DEFAULT_WORKFLOW);
  }

  /** Jobs on the tasks of another {@code WORKFLOW_POSTGRES_JOB_PREFIX}. */
  public EngineRuns withJobPrefix(String prefix) {
    return new EngineRuns(db, version, prefix, schema, workflowName);
  }

  /**
   * Engine tables in another schema than {@code workflow} (the engine itself always uses {@code
   * workflow}; for tests of a configured source schema). The queue stays in {@code
   * graphile_worker}.
   */
  public EngineRuns inSchema(String engineSchema) {
    return new EngineRuns(db, version, jobPrefix, engineSchema, workflowName);
  }

  /** Runs of another workflow. */
  public EngineRuns named(String workflow) {
    return new EngineRuns(db, version, jobPrefix, schema, workflow);
  }

  public EngineVersion version() {
    return version;
  }

  public String workflowName() {
    return workflowName;
  }

  /** The task the engine queues workflow messages on: {@code <jobPrefix>flows}. */
  public String flowsTask() {
    return jobPrefix + "flows";
  }

  // ---------------------------------------------------------------- states

  /** Created, never started: status {@code pending}, a {@code run_created} event only. */
  public String pending() {
    return seed((s, runId) -> s.createRun(runId));
  }

  /**
   * Running with a step in progress: the step {@code running} at attempt 1 after {@code
   * step_created} and {@code step_started}; no job (its invocation is gone).
   */
  public String midStep() {
    return seed(
        (s, runId) -> {
          s.createRun(runId);
          s.startRun(runId);
          String step = s.createStep(runId);
          s.startStep(runId, step, null);
        });
  }

  /**
   * Running with a step in progress in an invocation that a (dead) worker still holds: on {@link
   * EngineVersion#STABLE} the step message's job on {@code <jobPrefix>steps} locked by {@code
   * workerId}; on {@link EngineVersion#BETA} the workflow message's job on {@code <jobPrefix>flows}
   * locked by {@code workerId} and the step started lazily inline by that invocation ({@code
   * step_created} and {@code step_started} written together, {@code step_started} stamped with
   * {@code ownerMessageId} = the job's message id).
   */
  public String midStepLockedBy(String workerId) {
    return seed(
        (s, runId) -> {
          s.createRun(runId);
          Instant started = s.startRun(runId);
          if (version.hasStepTask()) {
            String step = s.createStep(runId);
            s.startStep(runId, step, null);
            String messageId = "msg_" + ulid();
            String body =
                json(
                    Map.of(
                        "workflowName", workflowName,
                        "workflowRunId", runId,
                        "workflowStartedAt", started.toEpochMilli(),
                        "stepId", step),
                    List.of("workflowName", "workflowRunId", "workflowStartedAt", "stepId"));
            long job =
                s.addJob(jobPrefix + "steps", messageId, stepName(), body, 1, null, messageId);
            s.lock(job, workerId);
          } else {
            String messageId = "msg_" + ulid();
            long job = s.addFlowsJob(runId, messageId, 1, null);
            s.lock(job, workerId);
            s.startStepLazily(runId, messageId);
          }
        });
  }

  /** Running, suspended on a wait whose time has come ({@code resume_at} 5 minutes ago); no job. */
  public String dueWait() {
    return seed(
        (s, runId) -> {
          s.createRun(runId);
          s.startRun(runId);
          s.createWait(runId, s.now().minus(Duration.ofMinutes(5)));
        });
  }

  /**
   * Running, suspended on a wait that resumes in 1 hour, with the engine's delayed wake-up job:
   * what the queue's task handler adds when the flow answers {@code {timeoutSeconds}} — the same
   * message id (and job key) as the invocation that suspended, payload attempt 2, {@code run_at} =
   * {@code resume_at}.
   */
  public String futureWaitWithJob() {
    return seed(
        (s, runId) -> {
          s.createRun(runId);
          s.startRun(runId);
          Instant resumeAt = s.createWait(runId, s.now().plus(Duration.ofHours(1)));
          s.addFlowsJob(runId, "msg_" + ulid(), 2, resumeAt);
        });
  }

  /** {@link #futureWaitWithJob()} whose wake-up job is lost. */
  public String futureWaitLostJob() {
    return seed(
        (s, runId) -> {
          s.createRun(runId);
          s.startRun(runId);
          s.createWait(runId, s.now().plus(Duration.ofHours(1)));
        });
  }

  /**
   * Running, parked on a hook ({@code workflow_hooks} row, {@code hook_created}); when {@code
   * received}, a {@code hook_received} event too (and no job: the resume message is lost).
   */
  public String hookParked(boolean received) {
    return seed(
        (s, runId) -> {
          s.createRun(runId);
          s.startRun(runId);
          String token = s.createHook(runId);
          if (received) {
            s.receiveHook(runId, token);
          }
        });
  }

  /** Running, every step completed, no wait, no hook, no job: nobody will wake it. */
  public String lostWakeUp() {
    return seed(
        (s, runId) -> {
          s.createRun(runId);
          s.startRun(runId);
          s.completedStep(runId);
        });
  }

  /**
   * Running, its step's completion torn: the step started, then its row {@code completed} with its
   * output (the engine's first statement) and no {@code step_completed} event (the process died
   * before the second).
   */
  public String tornStepCompleted() {
    return tornStep("completed");
  }

  /**
   * The 5.0 line's {@link #tornStepCompleted()} of a step run inline by the delivery of a workflow
   * message whose job {@code workerId} still holds: {@code step_started} names that message as the
   * step's owner, as in {@link #midStepLockedBy}.
   */
  public String tornStepCompletedLockedBy(String workerId) {
    return seed(
        (s, runId) -> {
          s.createRun(runId);
          s.startRun(runId);
          String messageId = "msg_" + ulid();
          long job = s.addFlowsJob(runId, messageId, 1, null);
          s.lock(job, workerId);
          String step = s.startStepLazily(runId, messageId);
          s.tearStep(runId, step, "completed");
        });
  }

  /**
   * {@link #tornStepCompletedByItsMessageWhileAPeerHoldsItAgain}, and the peer's delivery has
   * started the step too (after the dead delivery did): the completed row without its event may be
   * the peer's write half-way through.
   */
  public String tornStepCompletedStartedAgainByAPeer(String workerId, String peerWorkerId) {
    return tornStepByItsMessage(workerId, peerWorkerId, true);
  }

  /**
   * {@link #tornStepCompleted()} of a step run by its own message (no inline owner in its {@code
   * step_started}), whose job {@code workerId} still holds: on the 5.0 line the job's key is the
   * step's id and its body names the step, as the runtime queues a step of a {@code Promise.all};
   * on the 4.x line the job is on the step task, as every step is.
   */
  public String tornStepCompletedByItsMessageLockedBy(String workerId) {
    return tornStepByItsMessage(workerId, null, false);
  }

  /**
   * {@link #tornStepCompletedByItsMessageLockedBy}, and the step queued again while that delivery
   * held it (the runtime's concurrent replays do): the queue gave the new message a job of its own,
   * which a peer's worker {@code peerWorkerId} holds. Whose the completed row is, no event says.
   */
  public String tornStepCompletedByItsMessageWhileAPeerHoldsItAgain(
      String workerId, String peerWorkerId) {
    return tornStepByItsMessage(workerId, peerWorkerId, false);
  }

  /**
   * A step started by its own message, whose job {@code workerId} holds; then queued again for
   * {@code peerWorkerId} (unless null), whose delivery started it too if {@code peerStarted}; its
   * row completed, no event.
   */
  private String tornStepByItsMessage(String workerId, String peerWorkerId, boolean peerStarted) {
    return seed(
        (s, runId) -> {
          s.createRun(runId);
          s.startRun(runId);
          String step = s.createStep(runId);
          s.lock(stepJob(s, runId, step), workerId);
          s.startStep(runId, step, null);
          if (peerWorkerId != null) {
            s.lock(stepJob(s, runId, step), peerWorkerId);
            if (peerStarted) {
              s.startStep(runId, step, null);
            }
          }
          s.tearStep(runId, step, "completed");
        });
  }

  /** A job of a message that runs {@code step}, queued as this engine line queues one. */
  private long stepJob(Seeder s, String runId, String step) throws SQLException {
    if (!version.hasStepTask()) {
      return s.addStepMessageJob(runId, step);
    }
    String messageId = "msg_" + ulid();
    String body =
        json(
            Map.of("workflowName", workflowName, "workflowRunId", runId, "stepId", step),
            List.of("workflowName", "workflowRunId", "stepId"));
    return s.addJob(jobPrefix + "steps", messageId, stepName(), body, 1, null, messageId);
  }

  /**
   * Running, two steps of a {@code Promise.all}: the first delivered as its own message, whose job
   * {@code workerId} still holds, and completed; the second then started lazily inline by that same
   * delivery ({@code step_started} names the step message as its owner) and interrupted mid-body.
   * Returns the run id; the owner message is the second step's.
   */
  public String midInlineStepOwnedByAStepMessageLockedBy(String workerId) {
    return seed(
        (s, runId) -> {
          s.createRun(runId);
          s.startRun(runId);
          String first = s.createStep(runId);
          String messageId = "msg_" + ulid();
          long job = s.addStepMessageJob(runId, first, messageId);
          s.lock(job, workerId);
          s.startStep(runId, first, null);
          s.completeStep(runId, first);
          s.startStepLazily(runId, messageId);
        });
  }

  /** Like {@link #tornStepCompleted()}, the row {@code failed} with its error, no event. */
  public String tornStepFailed() {
    return tornStep("failed");
  }

  private String tornStep(String status) {
    return seed(
        (s, runId) -> {
          s.createRun(runId);
          s.startRun(runId);
          String step = s.createStep(runId);
          s.startStep(runId, step, null);
          s.tearStep(runId, step, status);
        });
  }

  /** Running, a wait row inserted with no {@code wait_created} event. */
  public String tornWaitCreated() {
    return seed(
        (s, runId) -> {
          s.createRun(runId);
          s.startRun(runId);
          s.tearWait(runId, s.now().plus(Duration.ofSeconds(1)), false);
        });
  }

  /** Running, a wait created (row and event), then its row completed with no event. */
  public String tornWaitCompleted() {
    return seed(
        (s, runId) -> {
          s.createRun(runId);
          s.startRun(runId);
          s.tearWait(runId, s.now().minus(Duration.ofSeconds(1)), true);
        });
  }

  /** A finished run: {@code completed}, {@code failed} or {@code cancelled}. */
  public String terminal(String status) {
    if (!Set.of("completed", "failed", "cancelled").contains(status)) {
      throw new IllegalArgumentException("not a terminal status: " + status);
    }
    return seed(
        (s, runId) -> {
          s.createRun(runId);
          s.startRun(runId);
          if (!status.equals("cancelled")) {
            s.completedStep(runId);
          }
          s.finishRun(runId, status);
        });
  }

  /**
   * Running, no open step, its workflow message's job locked by {@code workerId} (attempts 1, as
   * graphile-worker's {@code get_job} leaves it).
   */
  public String queuedJobLockedBy(String workerId) {
    return seed(
        (s, runId) -> {
          s.createRun(runId);
          s.startRun(runId);
          s.completedStep(runId);
          long job = s.addFlowsJob(runId, "msg_" + ulid(), 1, null);
          s.lock(job, workerId);
        });
  }

  /**
   * A delivery of {@code runId} under way: a workflow message's job of the run that {@code
   * workerId} holds, as a live process that took the run up does.
   */
  public void deliveringBy(String runId, String workerId) {
    seedOn(runId, (s, run) -> s.lock(s.addFlowsJob(run, "msg_" + ulid(), 1, null), workerId));
  }

  /**
   * Running, its workflow message's job failed permanently: attempts = max attempts (3), unlocked,
   * {@code last_error} set, as graphile-worker's {@code fail_job} leaves it after the third
   * failure.
   */
  public String exhaustedJob() {
    return seed(
        (s, runId) -> {
          s.createRun(runId);
          s.startRun(runId);
          long job = s.addFlowsJob(runId, "msg_" + ulid(), 1, null);
          s.exhaust(job);
        });
  }

  /** Running, its workflow message's job unlocked and due (attempts 0). */
  public String unlockedQueuedJob() {
    return seed(
        (s, runId) -> {
          s.createRun(runId);
          s.startRun(runId);
          s.addFlowsJob(runId, "msg_" + ulid(), 1, null);
        });
  }

  // ------------------------------------------------------- the engine's formats

  /**
   * The JSON text the engine stores as a workflow message's job payload: {@code
   * JSON.stringify(MessageData.encode({id, data, attempt, messageId}))} with {@code data} the
   * message body {@code {"runId":...}}.
   */
  public static String flowsPayload(
      String messageId, String workflowName, String runId, int attempt) {
    return jobPayload(
        messageId, workflowName, json(Map.of("runId", runId), List.of("runId")), attempt);
  }

  private static String jobPayload(String messageId, String id, String body, int attempt) {
    // MessageData's shape order: attempt, messageId, (idempotencyKey, headers: unset), id, data.
    ObjectNode payload = Api.JSON.createObjectNode();
    payload.put("attempt", attempt);
    payload.put("messageId", messageId);
    payload.put("id", id);
    payload.put("data", Base64.getEncoder().encodeToString(body.getBytes(StandardCharsets.UTF_8)));
    return payload.toString();
  }

  /** {@code JSON.stringify} of a flat object, keys in the given order. */
  private static String json(Map<String, Object> values, List<String> order) {
    ObjectNode node = Api.JSON.createObjectNode();
    for (String key : order) {
      Object v = values.get(key);
      if (v instanceof Number n) {
        node.put(key, n.longValue());
      } else {
        node.put(key, String.valueOf(v));
      }
    }
    return node.toString();
  }

  private static final String ULID_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
  private static final SecureRandom RANDOM = new SecureRandom();
  private static final BigInteger RANDOM_LIMIT = BigInteger.ONE.shiftLeft(80);
  private static long lastUlidTime = -1;
  private static BigInteger lastUlidRandom = BigInteger.ZERO;

  /**
   * A 26-character Crockford base-32 ULID, monotonic across the JVM like the engine's {@code
   * monotonicFactory()}: within one millisecond the random part counts up.
   */
  public static synchronized String ulid() {
    long time = Math.max(System.currentTimeMillis(), lastUlidTime);
    BigInteger random;
    if (time == lastUlidTime) {
      random = lastUlidRandom.add(BigInteger.ONE);
      if (random.compareTo(RANDOM_LIMIT) >= 0) {
        time++;
        random = new BigInteger(80, RANDOM);
      }
    } else {
      random = new BigInteger(80, RANDOM);
    }
    lastUlidTime = time;
    lastUlidRandom = random;
    BigInteger value = BigInteger.valueOf(time).shiftLeft(80).or(random);
    char[] out = new char[26];
    for (int i = 25; i >= 0; i--) {
      out[i] = ULID_ALPHABET.charAt(value.intValue() & 31);
      value = value.shiftRight(5);
    }
    return new String(out);
  }

  /** A new run id, {@code wrun_<ULID>}. */
  public static String newRunId() {
    return "wrun_" + ulid();
  }

  private static String stepName() {
    return STEP_NAME;
  }

  // ------------------------------------------------------------ the writes

  private interface Writes {
    void apply(Seeder s, String runId) throws SQLException;
  }

  private String seed(Writes writes) {
    return seedOn(newRunId(), writes);
  }

  private String seedOn(String runId, Writes writes) {
    try (Connection c = db.connect()) {
      c.setAutoCommit(false);
      try {
        writes.apply(new Seeder(c), runId);
        c.commit();
      } catch (SQLException | RuntimeException e) {
        c.rollback();
        throw e;
      }
    } catch (SQLException e) {
      throw new IllegalStateException("seeding a run of " + version + " failed", e);
    }
    return runId;
  }

  /** The engine's writes for one run, in one connection. */
  private final class Seeder {
    private final Connection c;
    private Instant last = Instant.EPOCH;

    Seeder(Connection c) {
      this.c = c;
    }

    /** A JS {@code Date.now()}: millisecond precision, never before the previous one. */
    Instant now() {
      Instant t = Instant.now().truncatedTo(ChronoUnit.MILLIS);
      if (!t.isAfter(last)) {
        t = last.plusMillis(1);
      }
      last = t;
      return t;
    }

    private String table(String name) {
      return schema + "." + name;
    }

    private int spec() {
      return version.specVersion();
    }

    Instant createRun(String runId) throws SQLException {
      Instant t = now();
      byte[] input = opaque("input of " + runId);
      update(
          "INSERT INTO "
              + table("workflow_runs")
              + " (id, deployment_id, status, name, spec_version, input_cbor, created_at,"
              + " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
          runId,
          DEPLOYMENT_ID,
          enumValue("pending"),
          workflowName,
          String.valueOf(spec()),
          Cbor.encode(input),
          utc(t),
          utc(t));
      event(
          runId,
          "run_created",
          null,
          map("deploymentId", DEPLOYMENT_ID, "workflowName", workflowName, "input", input),
          t);
      return t;
    }

    Instant startRun(String runId) throws SQLException {
      Instant t = now();
      update(
          "UPDATE "
              + table("workflow_runs")
              + " SET status = ?, started_at = ?, updated_at = ? WHERE id = ?",
          enumValue("running"),
          utc(t),
          utc(t),
          runId);
      // The engine stores no event data on run_started.
      event(runId, "run_started", null, null, t);
      return t;
    }

    void finishRun(String runId, String status) throws SQLException {
      Instant t = now();
      Map<String, Object> data;
      switch (status) {
        case "completed" -> {
          byte[] output = opaque("output of " + runId);
          update(
              "UPDATE "
                  + table("workflow_runs")
                  + " SET status = ?, output_cbor = ?, completed_at = ?, updated_at = ?"
                  + " WHERE id = ?",
              enumValue(status),
              Cbor.encode(output),
              utc(t),
              utc(t),
              runId);
          data = map("output", output);
        }
        case "failed" -> {
          byte[] error = opaque("error of " + runId);
          if (version == EngineVersion.BETA) {
            update(
                "UPDATE "
                    + table("workflow_runs")
                    + " SET status = ?, error_cbor = ?, error_code = ?, completed_at = ?,"
                    + " updated_at = ? WHERE id = ?",
                enumValue(status),
                Cbor.encode(error),
                "USER_ERROR",
                utc(t),
                utc(t),
                runId);
            data = map("error", error, "errorCode", "USER_ERROR");
          } else {
            // 4.x: the runtime sends a StructuredError; the run keeps {message, stack, code}.
            String message = "error of " + runId;
            String stack = "Error: " + message + "\n    at processOrder (order.ts:1:1)";
            update(
                "UPDATE "
                    + table("workflow_runs")
                    + " SET status = ?, error_cbor = ?, completed_at = ?, updated_at = ?"
                    + " WHERE id = ?",
                enumValue(status),
                Cbor.encode(map("message", message, "stack", stack, "code", "USER_ERROR")),
                utc(t),
                utc(t),
                runId);
            data = map("error", map("message", message, "stack", stack), "errorCode", "USER_ERROR");
          }
        }
        default -> {
          update(
              "UPDATE "
                  + table("workflow_runs")
                  + " SET status = ?, completed_at = ?, updated_at = ? WHERE id = ?",
              enumValue(status),
              utc(t),
              utc(t),
              runId);
          data = null;
        }
      }
      // A terminal transition deletes the run's hooks and waits (to free hook tokens).
      update("DELETE FROM " + table("workflow_hooks") + " WHERE run_id = ?", runId);
      update("DELETE FROM " + table("workflow_waits") + " WHERE run_id = ?", runId);
      event(runId, "run_" + status, null, data, t);
    }

    String createStep(String runId) throws SQLException {
      Instant t = now();
      String stepId = "step_" + ulid();
      byte[] input = opaque("input of " + stepId);
      update(
          "INSERT INTO "
              + table("workflow_steps")
              + " (run_id, step_id, step_name, status, attempt, input_cbor, spec_version,"
              + " created_at, updated_at) VALUES (?, ?, ?, ?, 0, ?, ?, ?, ?)",
          runId,
          stepId,
          stepName(),
          enumValue("pending"),
          Cbor.encode(input),
          spec(),
          utc(t),
          utc(t));
      event(runId, "step_created", stepId, map("stepName", stepName(), "input", input), t);
      return stepId;
    }

    void startStep(String runId, String stepId, Map<String, Object> data) throws SQLException {
      Instant t = now();
      update(
          "UPDATE "
              + table("workflow_steps")
              + " SET status = ?, attempt = attempt + 1, started_at = COALESCE(started_at, ?),"
              + " retry_after = NULL, updated_at = ? WHERE run_id = ? AND step_id = ?",
          enumValue("running"),
          utc(t),
          utc(t),
          runId,
          stepId);
      event(runId, "step_started", stepId, data, t);
    }

    /**
     * The beta's lazy step start by the invocation of {@code ownerMessageId}: the step row, a
     * synthetic {@code step_created} and the {@code step_started} (without the input) together.
     */
    String startStepLazily(String runId, String ownerMessageId) throws SQLException {
      String stepId = createStep(runId);
      startStep(
          runId,
          stepId,
          map(
              "stepName",
              stepName(),
              "workflowName",
              workflowName,
              "ownerMessageId",
              ownerMessageId));
      return stepId;
    }

    void completeStep(String runId, String stepId) throws SQLException {
      Instant t = now();
      byte[] result = opaque("result of " + stepId);
      update(
          "UPDATE "
              + table("workflow_steps")
              + " SET status = ?, output_cbor = ?, completed_at = ?, updated_at = ?"
              + " WHERE run_id = ? AND step_id = ?",
          enumValue("completed"),
          Cbor.encode(result),
          utc(t),
          utc(t),
          runId,
          stepId);
      event(runId, "step_completed", stepId, map("result", result), t);
    }

    /**
     * The first of the engine's two statements of a step's {@code step_completed} or {@code
     * step_failed}, without the second (the event): what a process killed between them leaves.
     */
    void tearStep(String runId, String stepId, String status) throws SQLException {
      Instant t = now();
      boolean completed = status.equals("completed");
      byte[] value = opaque((completed ? "result of " : "error of ") + stepId);
      Object stored =
          completed || version == EngineVersion.BETA
              ? value
              : map("message", "error of " + stepId, "stack", "Error: error of " + stepId);
      update(
          "UPDATE "
              + table("workflow_steps")
              + " SET status = ?, "
              + (completed ? "output_cbor" : "error_cbor")
              + " = ?, completed_at = ?, updated_at = ? WHERE run_id = ? AND step_id = ?",
          enumValue(status),
          Cbor.encode(stored),
          utc(t),
          utc(t),
          runId,
          stepId);
    }

    /**
     * A wait row with no {@code wait_created} event ({@code completed} false), or a wait created
     * with its event whose row was then completed with no {@code wait_completed} event.
     */
    void tearWait(String runId, Instant resumeAt, boolean completed) throws SQLException {
      Instant t = now();
      String correlationId = "wait_" + ulid();
      if (completed) {
        createWaitWithId(runId, correlationId, resumeAt);
        update(
            "UPDATE "
                + table("workflow_waits")
                + " SET status = ?, completed_at = ?, updated_at = ? WHERE wait_id = ?",
            enumValue("completed"),
            utc(t),
            utc(t),
            runId + "-" + correlationId);
      } else {
        update(
            "INSERT INTO "
                + table("workflow_waits")
                + " (wait_id, run_id, status, resume_at, spec_version, created_at, updated_at)"
                + " VALUES (?, ?, ?, ?, ?, ?, ?)",
            runId + "-" + correlationId,
            runId,
            enumValue("waiting"),
            utc(resumeAt.truncatedTo(ChronoUnit.MILLIS)),
            spec(),
            utc(t),
            utc(t));
      }
    }

    void completedStep(String runId) throws SQLException {
      String step = createStep(runId);
      startStep(runId, step, null);
      completeStep(runId, step);
    }

    /** A wait until {@code resumeAt} (to the millisecond, a JS Date); returns it. */
    Instant createWait(String runId, Instant resumeAt) throws SQLException {
      return createWaitWithId(runId, "wait_" + ulid(), resumeAt);
    }

    private Instant createWaitWithId(String runId, String correlationId, Instant resumeAt)
        throws SQLException {
      Instant t = now();
      Instant at = resumeAt.truncatedTo(ChronoUnit.MILLIS);
      update(
          "INSERT INTO "
              + table("workflow_waits")
              + " (wait_id, run_id, status, resume_at, spec_version, created_at, updated_at)"
              + " VALUES (?, ?, ?, ?, ?, ?, ?)",
          runId + "-" + correlationId,
          runId,
          enumValue("waiting"),
          utc(at),
          spec(),
          utc(t),
          utc(t));
      event(runId, "wait_created", correlationId, map("resumeAt", at), t);
      return at;
    }

    /** A hook made with {@code createHook()} (not a webhook); returns its token. */
    String createHook(String runId) throws SQLException {
      Instant t = now();
      String hookId = "hook_" + ulid();
      String token = "tok_" + ulid().toLowerCase();
      String systemColumn = version == EngineVersion.BETA ? ", is_system" : "";
      String systemValue = version == EngineVersion.BETA ? ", false" : "";
      update(
          "INSERT INTO "
              + table("workflow_hooks")
              + " (run_id, hook_id, token, owner_id, project_id, environment, created_at,"
              + " spec_version, is_webhook"
              + systemColumn
              + ") VALUES (?, ?, ?, '', '', '', ?, ?, false"
              + systemValue
              + ")",
          runId,
          hookId,
          token,
          utc(t),
          spec());
      event(runId, "hook_created", hookId, map("token", token, "isWebhook", false), t);
      return token;
    }

    void receiveHook(String runId, String token) throws SQLException {
      Instant t = now();
      String hookId;
      try (PreparedStatement s =
          c.prepareStatement(
              "SELECT hook_id FROM " + table("workflow_hooks") + " WHERE token = ?")) {
        s.setString(1, token);
        try (ResultSet rs = s.executeQuery()) {
          rs.next();
          hookId = rs.getString(1);
        }
      }
      event(runId, "hook_received", hookId, map("payload", opaque("payload for " + token)), t);
    }

    long addFlowsJob(String runId, String messageId, int attempt, Instant runAt)
        throws SQLException {
      return addJob(
          flowsTask(),
          messageId,
          workflowName,
          json(Map.of("runId", runId), List.of("runId")),
          attempt,
          runAt,
          messageId);
    }

    /** A step's own message on the flows task, keyed by the step's id as the runtime keys it. */
    long addStepMessageJob(String runId, String stepId) throws SQLException {
      return addStepMessageJob(runId, stepId, "msg_" + ulid());
    }

    /** {@link #addStepMessageJob(String, String)} with the message id given. */
    long addStepMessageJob(String runId, String stepId, String messageId) throws SQLException {
      return addJob(
          flowsTask(),
          messageId,
          workflowName,
          json(
              Map.of("workflowName", workflowName, "workflowRunId", runId, "stepId", stepId),
              List.of("workflowName", "workflowRunId", "stepId")),
          1,
          null,
          stepId);
    }

    /** {@code WorkerUtils.addJob} of graphile-worker 0.16, as the engine's queue calls it. */
    long addJob(
        String task,
        String messageId,
        String id,
        String body,
        int attempt,
        Instant runAt,
        String jobKey)
        throws SQLException {
      try (PreparedStatement s =
          c.prepareStatement(
              "SELECT (j).id FROM (SELECT "
                  + QUEUE_SCHEMA
                  + ".add_job(identifier => ?::text, payload => ?::json, queue_name => ?::text,"
                  + " run_at => ?::timestamptz, max_attempts => ?::int, job_key => ?::text,"
                  + " priority => ?::int, flags => ?::text[], job_key_mode => ?::text) AS j) q")) {
        s.setString(1, task);
        s.setString(2, jobPayload(messageId, id, body, attempt));
        s.setNull(3, Types.VARCHAR);
        s.setString(4, runAt == null ? null : runAt.toString());
        s.setInt(5, MAX_ATTEMPTS);
        s.setString(6, jobKey);
        s.setNull(7, Types.INTEGER);
        s.setNull(8, Types.ARRAY);
        s.setNull(9, Types.VARCHAR);
        try (ResultSet rs = s.executeQuery()) {
          rs.next();
          return rs.getLong(1);
        }
      }
    }

    /** What graphile-worker's {@code get_job} does to the job it hands a worker. */
    void lock(long jobId, String workerId) throws SQLException {
      update(
          "UPDATE "
              + QUEUE_SCHEMA
              + "._private_jobs SET attempts = attempts + 1, locked_by = ?, locked_at = now()"
              + " WHERE id = ?",
          workerId,
          jobId);
    }

    /** What graphile-worker's {@code fail_job} leaves after the last allowed attempt failed. */
    void exhaust(long jobId) throws SQLException {
      update(
          "UPDATE "
              + QUEUE_SCHEMA
              + "._private_jobs SET attempts = max_attempts, locked_by = NULL, locked_at = NULL,"
              + " last_error = ?, run_at = greatest(now(), run_at)"
              + " + exp(least(max_attempts, 10)) * interval '1 second', updated_at = now()"
              + " WHERE id = ?",
          "Error: [postgres world] Queue execution failed (500): Internal Server Error",
          jobId);
    }

    private void event(
        String runId, String type, String correlationId, Map<String, Object> data, Instant t)
        throws SQLException {
      update(
          "INSERT INTO "
              + table("workflow_events")
              + " (id, type, correlation_id, created_at, run_id, payload_cbor, spec_version)"
              + " VALUES (?, ?, ?, ?, ?, ?, ?)",
          "wevt_" + ulid(),
          type,
          correlationId,
          utc(t),
          runId,
          data == null ? null : Cbor.encode(data),
          spec());
    }

    private void update(String sql, Object... params) throws SQLException {
      try (PreparedStatement s = c.prepareStatement(sql)) {
        for (int i = 0; i < params.length; i++) {
          Object p = params[i];
          if (p instanceof EnumValue e) {
            s.setObject(i + 1, e.value(), Types.OTHER);
          } else if (p == null) {
            s.setNull(i + 1, Types.NULL);
          } else {
            s.setObject(i + 1, p);
          }
        }
        s.executeUpdate();
      }
    }
  }

  /** A value of one of the engine's enum types (status, step_status, wait_status). */
  private record EnumValue(String value) {}

  private static EnumValue enumValue(String value) {
    return new EnumValue(value);
  }

  private static LocalDateTime utc(Instant t) {
    return LocalDateTime.ofInstant(t, ZoneOffset.UTC);
  }

  /** Serialized user data: opaque to the engine, which stores it as it got it. */
  private static byte[] opaque(String what) {
    return what.getBytes(StandardCharsets.UTF_8);
  }

  private static Map<String, Object> map(Object... keysAndValues) {
    Map<String, Object> m = new LinkedHashMap<>();
    for (int i = 0; i < keysAndValues.length; i += 2) {
      m.put((String) keysAndValues[i], keysAndValues[i + 1]);
    }
    return m;
  }

  /**
   * The subset of {@code cbor-x} 1.6's default encoding that event data uses: objects as maps with
   * a 16-bit length, {@code Uint8Array} as tag 64 + byte string, {@code Date} as tag 1 + seconds
   * (an unsigned integer when whole, else a float64), minimal heads elsewhere.
   */
  static final class Cbor {
    private Cbor() {}

    static byte[] encode(Object value) {
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      write(out, value);
      return out.toByteArray();
    }

    private static void write(ByteArrayOutputStream out, Object value) {
      if (value == null) {
        out.write(0xf6);
      } else if (value instanceof Boolean b) {
        out.write(b ? 0xf5 : 0xf4);
      } else if (value instanceof Integer || value instanceof Long) {
        long n = ((Number) value).longValue();
        if (n >= 0) {
          head(out, 0, n);
        } else {
          head(out, 1, -1 - n);
        }
      } else if (value instanceof String s) {
        byte[] bytes = s.getBytes(StandardCharsets.UTF_8);
        head(out, 3, bytes.length);
        out.writeBytes(bytes);
      } else if (value instanceof byte[] bytes) {
        out.write(0xd8);
        out.write(64);
        head(out, 2, bytes.length);
        out.writeBytes(bytes);
      } else if (value instanceof Instant t) {
        out.write(0xc1);
        if (t.getNano() == 0 && t.getEpochSecond() >= 0 && t.getEpochSecond() < (1L << 32)) {
          out.write(0x1a);
          writeBig(out, t.getEpochSecond(), 4);
        } else {
          out.write(0xfb);
          writeBig(out, Double.doubleToLongBits(t.toEpochMilli() / 1000.0), 8);
        }
      } else if (value instanceof Map<?, ?> m) {
        out.write(0xb9);
        writeBig(out, m.size(), 2);
        for (Map.Entry<?, ?> e : m.entrySet()) {
          write(out, (String) e.getKey());
          write(out, e.getValue());
        }
      } else {
        throw new IllegalArgumentException("no CBOR for " + value.getClass());
      }
    }

    private static void head(ByteArrayOutputStream out, int major, long n) {
      int type = major << 5;
      if (n < 24) {
        out.write(type | (int) n);
      } else if (n < 0x100) {
        out.write(type | 24);
        writeBig(out, n, 1);
      } else if (n < 0x10000) {
        out.write(type | 25);
        writeBig(out, n, 2);
      } else if (n < 0x100000000L) {
        out.write(type | 26);
        writeBig(out, n, 4);
      } else {
        out.write(type | 27);
        writeBig(out, n, 8);
      }
    }

    private static void writeBig(ByteArrayOutputStream out, long n, int bytes) {
      for (int i = bytes - 1; i >= 0; i--) {
        out.write((int) (n >>> (8 * i)) & 0xff);
      }
    }
  }
}
