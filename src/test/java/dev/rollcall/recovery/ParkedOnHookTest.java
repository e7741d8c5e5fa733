package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
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
import java.util.Set;
import java.util.UUID;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A run whose last replay suspended on a hook gets no new job, even from the takeover of the
 * instance that ran it: its latest event is {@code hook_created} and no job of it is left, so the
 * delivery that created the hook finished there. A run whose hook was already received (a lost
 * resume message) is still re-driven: a hook row alone is no proof.
 */
@ServiceTest
class ParkedOnHookTest extends ApiTestBase {

  @Inject Reaper reaper;

  EngineRuns runs;
  String deploy;

  @BeforeEach
  void fresh() {
    runs = EngineRuns.on(RollcallTestResource.database(), EngineVersion.STABLE);
    deploy = UUID.randomUUID().toString();
  }

  @Test
  void aTakeoverSkipsTheDeadOwnersRunThatParkedOnAHookAndReDrivesOneWhoseHookWasReceived() {
    String parked = runs.hookParked(false);
    String received = runs.hookParked(true);
    TimeTravel.engineQuiet(parked, received);
    Instance peer = api.register(SourceTables.ENGINE, deploy, "peer");
    api.drain(peer, 5000);
    long jobsBefore = jobsOf(parked);

    // The victim still reported both runs when it died (it parked them after its last beat).
    Instance victim = api.register(SourceTables.ENGINE, deploy, "victim");
    api.heartbeat(victim, List.of(parked, received)).expect(200);
    TimeTravel.leaseExpired(victim);
    reaper.runOnce().await().indefinitely();

    Map<String, JsonNode> handedOut = new HashMap<>();
    for (Batch b; (b = api.claimBatch(peer, 100)) != null; ) {
      b.json().get("runs").forEach(r -> handedOut.put(r.get("runId").asText(), r));
      api.complete(peer, b, List.of()).expect(200);
    }
    assertFalse(handedOut.containsKey(parked), handedOut.toString());
    assertTrue(handedOut.containsKey(received), handedOut.toString());
    assertEquals("owner-dead", handedOut.get(received).get("reason").asText());
    // The ledger keeps a run's skip once per reason since its last hand-out: the boot pass's.
    assertEquals(
        Set.of("skipped:parked-on-hook"),
        Db.set("SELECT outcome || ':' || reason FROM rollcall.ledger WHERE run_id = ?", parked));
    assertEquals(jobsBefore, jobsOf(parked));
    api.leave(peer).expect(204);
  }

  @Test
  void aParkedRunWhoseDeliveryDiedBeforeFinishingIsNotParked() {
    // hook_created is its latest event, but the delivery that wrote it is still in the queue,
    // locked by a worker nobody owns: it did not finish, so the hook proves nothing.
    String run = runs.hookParked(false);
    Db.number(
        "SELECT id FROM graphile_worker.add_job('workflow_flows', ?::json, max_attempts => 3,"
            + " job_key => ?)",
        EngineRuns.flowsPayload("msg_" + EngineRuns.ulid(), "wf", run, 1),
        "msg_" + run);
    Db.update(
        "UPDATE graphile_worker._private_jobs SET locked_by = 'worker-gone-"
            + deploy
            + "',"
            + " locked_at = now() - interval '5 hours' WHERE key = ?",
        "msg_" + run);
    TimeTravel.engineQuiet(run);

    Instance booting = api.register(SourceTables.ENGINE, deploy, "booting");
    Map<String, String> reasons = new HashMap<>();
    for (Batch b; (b = api.claimBatch(booting, 5000)) != null; ) {
      b.json()
          .get("runs")
          .forEach(r -> reasons.put(r.get("runId").asText(), r.get("reason").asText()));
      api.complete(booting, b, List.of()).expect(200);
    }
    assertEquals("no-live-wake-path", reasons.get(run), reasons.toString());
    api.leave(booting).expect(204);
  }

  static long jobsOf(String runId) {
    return Db.number(
        "SELECT count(*) FROM graphile_worker._private_jobs"
            + " WHERE rollcall.engine_run_id(payload) = ?",
        runId);
  }
}
