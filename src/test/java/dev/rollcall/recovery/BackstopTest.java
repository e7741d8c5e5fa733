package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Batch;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.EngineRuns;
import dev.rollcall.testing.EngineVersion;
import dev.rollcall.testing.RollcallTestResource;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import dev.rollcall.testing.TimeTravel;
import jakarta.inject.Inject;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The 5.0 engine's inline-ownership lease: a step interrupted mid-way is re-run at once only by a
 * delivery of its owner message; any other message only arms a delayed backstop wake-up. A queued
 * backstop is therefore no proof that a run whose owner message is gone will finish: takeovers and
 * sweeps re-drive it with the owner's message id. A sleeping run still gets nothing.
 */
@ServiceTest
class BackstopTest extends ApiTestBase {

  @Inject Reaper reaper;

  EngineRuns runs;
  String deploy;

  @BeforeEach
  void fresh() {
    runs = EngineRuns.on(RollcallTestResource.database(), EngineVersion.BETA);
    deploy = UUID.randomUUID().toString();
  }

  /** The message id of the run's workflow job the seeding added (its key). */
  static String ownerMessage(String runId) {
    return Db.column(
            "SELECT key FROM graphile_worker._private_jobs"
                + " WHERE rollcall.engine_run_id(payload) = ?",
            runId)
        .get(0);
  }

  /**
   * The owner's job can never run again (graphile-worker keeps a job that failed its last attempt,
   * unlocked), and the engine armed a backstop for the rest of the 860 s lease: a workflow job
   * keyed {@code <stepId>:backstop:<startedAt>}, due in 850 s, unlocked.
   */
  static void ownerGoneBackstopArmed(String runId, String owner) {
    Db.update(
        "UPDATE graphile_worker._private_jobs SET attempts = max_attempts, locked_by = NULL,"
            + " locked_at = NULL WHERE key = ?",
        owner);
    Db.number(
        "SELECT id FROM graphile_worker.add_job('workflow_flows', ?::json,"
            + " run_at => now() + interval '850 seconds', job_key => ?, max_attempts => 3)",
        EngineRuns.flowsPayload("msg_" + EngineRuns.ulid(), "wf", runId, 1),
        "step_" + runId + ":backstop:1");
  }

  /** An instance of this test's deploy whose boot work is done: its claims see takeovers only. */
  Instance booted(String name) {
    Instance peer = api.register(SourceTables.ENGINE, deploy, name);
    api.drain(peer, 5000);
    return peer;
  }

  /** An instance that reported executing the run's owner message, then died and was reaped. */
  Instance diedExecuting(String run, String owner) {
    Instance victim = api.register(SourceTables.ENGINE, deploy, "victim");
    api.heartbeatEntries(victim, List.of(Api.execution(run, owner))).expect(200);
    TimeTravel.leaseExpired(victim);
    reaper.runOnce().await().indefinitely();
    return victim;
  }

  static Map<String, JsonNode> byRun(Batch b) {
    Map<String, JsonNode> out = new HashMap<>();
    b.json().get("runs").forEach(r -> out.put(r.get("runId").asText(), r));
    return out;
  }

  @Test
  void aTakeoverReDrivesARunWhoseOwnerMessageIsGoneWithThatMessageIdDespiteAQueuedBackstop() {
    String dead = "worker-" + deploy;
    String run = runs.midStepLockedBy(dead);
    String owner = ownerMessage(run);
    ownerGoneBackstopArmed(run, owner);
    TimeTravel.engineQuiet(run);
    Instance peer = booted("peer");
    diedExecuting(run, owner);
    Batch taken = api.claimBatch(peer, 100);

    JsonNode r = byRun(taken).get(run);
    assertEquals("owner-dead", r.get("reason").asText(), taken.json().toString());
    assertEquals(owner, r.get("messageId").asText());
    assertEquals(
        List.of("re-drive with message " + owner),
        Db.column("SELECT detail FROM rollcall.hand_outs_in_flight WHERE run_id = ?", run));
    api.complete(peer, taken, List.of()).expect(200);
    api.leave(peer).expect(204);
  }

  @Test
  void aTakeoverReleasesTheLockOnTheOwnersJobAndLetsItBeTheWakePath() {
    String dead = "worker-" + deploy;
    String run = runs.midStepLockedBy(dead);
    String owner = ownerMessage(run);
    TimeTravel.engineQuiet(run);
    Instance peer = booted("peer");
    Instance victim = diedExecuting(run, owner);

    assertEquals(
        List.of("-"),
        Db.column(
            "SELECT coalesce(locked_by, '-') FROM graphile_worker._private_jobs WHERE key = ?",
            owner));
    assertEquals(
        List.of("lock-released:owner-dead", "deferred:has-queued-job"), outcomes(victim, run));
    assertNull(api.claimBatch(peer, 100));
    // Re-checked while the job may still run: deferred again; once the window is over, a job still
    // queued is the wake path the run waits for, and the takeover closes.
    TimeTravel.deferredAnHourAgo(run);
    assertNull(api.claimBatch(peer, 100));
    assertEquals(1, Db.number("SELECT count(*) FROM rollcall.deferred WHERE run_id = ?", run));
    Db.update(
        "UPDATE rollcall.epochs SET created_at = created_at - interval '1 hour'"
            + " WHERE subject_instance_id = ?",
        victim.id());
    TimeTravel.deferredAnHourAgo(run);
    assertNull(api.claimBatch(peer, 100));
    assertEquals(
        List.of("lock-released:owner-dead", "deferred:has-queued-job", "skipped:has-queued-job"),
        outcomes(victim, run));
    assertEquals(
        List.of("closed"),
        Db.column("SELECT state FROM rollcall.epochs WHERE subject_instance_id = ?", victim.id()));
    api.leave(peer).expect(204);
  }

  @Test
  void aTakeoverReDrivesARunWhoseReleasedJobWillNeverRun() {
    String dead = "worker-" + deploy;
    String run = runs.midStepLockedBy(dead);
    String owner = ownerMessage(run);
    TimeTravel.engineQuiet(run);
    Instance peer = booted("peer");
    Instance victim = diedExecuting(run, owner);
    assertNull(api.claimBatch(peer, 100), "its own message, released, is trusted first");

    // A peer queued the same job key while the dead worker still held the lock: graphile-worker
    // left the old job with no attempts (and no key), and the new one ran and is gone. Nothing
    // wakes the run any more.
    Db.update(
        "UPDATE graphile_worker._private_jobs SET attempts = max_attempts, key = NULL"
            + " WHERE key = ?",
        owner);
    TimeTravel.deferredAnHourAgo(run);
    Batch taken = api.claimBatch(peer, 100);

    assertTrue(taken != null && taken.runIds().contains(run), "re-driven at the re-check");
    assertEquals("owner-dead", byRun(taken).get(run).get("reason").asText());
    api.complete(peer, taken, List.of()).expect(200);
    api.leave(peer).expect(204);
  }

  private static List<String> outcomes(Instance victim, String run) {
    return Db.column(
        "SELECT l.outcome || ':' || l.reason FROM rollcall.ledger l"
            + " JOIN rollcall.epochs e ON e.id = l.epoch_id"
            + " WHERE e.subject_instance_id = ? AND l.run_id = ? ORDER BY l.id",
        victim.id(),
        run);
  }

  @Test
  void aTakeoverLeavesARunAloneWhoseOwnerMessageAPeerJustPickedUp() {
    String run = runs.midStepLockedBy("worker-" + deploy);
    String owner = ownerMessage(run);
    TimeTravel.engineQuiet(run);
    Instance peer = booted("peer");
    Instance victim = api.register(SourceTables.ENGINE, deploy, "victim");
    api.heartbeatEntries(victim, List.of(Api.execution(run, owner))).expect(200);
    // The owner's message was released (an orphan, say) and a peer's worker, not yet learned
    // (its next heartbeat is up to an interval away), has just locked it to re-run the step.
    Db.update(
        "UPDATE graphile_worker._private_jobs SET locked_by = ?, locked_at = now() WHERE key = ?",
        "worker-peer-" + deploy,
        owner);
    TimeTravel.leaseExpired(victim);
    reaper.runOnce().await().indefinitely();

    assertNull(api.claimBatch(peer, 100), "no second delivery beside the peer's");
    assertEquals(
        List.of("deferred:has-queued-job"),
        Db.column(
            "SELECT l.outcome || ':' || l.reason FROM rollcall.ledger l"
                + " JOIN rollcall.epochs e ON e.id = l.epoch_id"
                + " WHERE e.subject_instance_id = ? AND l.run_id = ?",
            victim.id(),
            run));
    api.leave(peer).expect(204);
  }

  @Test
  void aPassReDrivesAStrandedOwnedStepWithItsOwnerMessageAndStillSkipsASleepingRun() {
    String stranded = runs.midStepLockedBy("worker-" + deploy);
    String owner = ownerMessage(stranded);
    ownerGoneBackstopArmed(stranded, owner);
    String sleeping = runs.futureWaitWithJob();
    TimeTravel.engineQuiet(stranded, sleeping);
    long jobsBefore =
        Db.number(
            "SELECT count(*) FROM graphile_worker._private_jobs"
                + " WHERE rollcall.engine_run_id(payload) = ?",
            sleeping);

    Instance booting = api.register(SourceTables.ENGINE, deploy, "booting");
    Map<String, JsonNode> handedOut = new HashMap<>();
    for (Batch b; (b = api.claimBatch(booting, 5000)) != null; ) {
      handedOut.putAll(byRun(b));
      api.complete(booting, b, List.of()).expect(200);
    }

    JsonNode r = handedOut.get(stranded);
    assertEquals("interrupted-step", r.get("reason").asText());
    assertEquals(owner, r.get("messageId").asText());
    assertFalse(handedOut.containsKey(sleeping));
    assertEquals(
        List.of("has-queued-job"),
        Db.column(
            "SELECT l.reason FROM rollcall.ledger l JOIN rollcall.epochs e ON e.id = l.epoch_id"
                + " WHERE e.deployment_id = ? AND l.run_id = ?",
            deploy,
            sleeping));
    assertEquals(
        jobsBefore,
        Db.number(
            "SELECT count(*) FROM graphile_worker._private_jobs"
                + " WHERE rollcall.engine_run_id(payload) = ?",
            sleeping));
    api.leave(booting).expect(204);
  }
}
