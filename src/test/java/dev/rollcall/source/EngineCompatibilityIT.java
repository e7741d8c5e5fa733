package dev.rollcall.source;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Batch;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.EngineFixture;
import dev.rollcall.testing.EngineRuns;
import dev.rollcall.testing.EngineVersion;
import dev.rollcall.testing.ServiceProcess;
import dev.rollcall.testing.SourceTables;
import dev.rollcall.testing.TestDatabase;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.UUID;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Rollcall against the real engine: the schema built by each supported {@code
 * @workflow/world-postgres} version's own migrations, runs in every state the engine can leave
 * them in, and the verdict and reason Rollcall gives each. Then the engine's own enqueue of a
 * handed-out run, which the next pass must recognise as that run's wake path.
 */
@Tag("compat")
class EngineCompatibilityIT {

  static final String LIVE_WORKER = "worker-live-compat";
  static final String DEAD_WORKER = "worker-dead-compat";

  @ParameterizedTest
  @EnumSource(EngineVersion.class)
  void everyRunStateGetsTheVerdictTheEnginesMaintainersAccept(EngineVersion version)
      throws Exception {
    try (TestDatabase db = TestDatabase.start()) {
      Db.bind(db);
      EngineFixture.setUpSchemas(db, version);
      Map<String, String> settings = new TreeMap<>();
      settings.put(
          "rollcall.namespaces.\"engine\".registration-secret", SourceTables.secret("engine"));
      settings.put("rollcall.namespaces.\"engine\".source.kind", "world-postgres");
      // The dead worker's locks stand for what a pass finds; a concurrent orphan release would
      // free them (rightly: has-queued-job) at a moment that depends on the machine's speed.
      settings.put("rollcall.orphaned-locks-interval", "off");
      try (ServiceProcess service = ServiceProcess.start("compat-" + version, db, settings)) {
        check(db, version, new Api(service.base()));
      }
    }
  }

  private void check(TestDatabase db, EngineVersion version, Api api) throws Exception {
    EngineRuns runs = EngineRuns.on(db, version);
    // What each seeded run must come out as: its final ledger reason (or none: not in the pass).
    Map<String, String> expected = new LinkedHashMap<>();
    expected.put(runs.pending(), "pending");
    expected.put(runs.midStep(), "interrupted-step");
    expected.put(runs.dueWait(), "due-wait");
    expected.put(runs.futureWaitWithJob(), "has-queued-job");
    expected.put(runs.futureWaitLostJob(), "no-live-wake-path");
    expected.put(runs.hookParked(false), "parked-on-hook");
    expected.put(runs.hookParked(true), "no-live-wake-path");
    expected.put(runs.lostWakeUp(), "no-live-wake-path");
    expected.put(runs.terminal("completed"), "(not in the pass)");
    expected.put(runs.queuedJobLockedBy(LIVE_WORKER), "has-queued-job");
    expected.put(runs.queuedJobLockedBy(DEAD_WORKER), "no-live-wake-path");
    expected.put(runs.exhaustedJob(), "no-live-wake-path");
    expected.put(runs.unlockedQueuedJob(), "has-queued-job");
    expected.put(runs.midStepLockedBy(DEAD_WORKER), "interrupted-step");
    String finishesDuringThePass = runs.lostWakeUp();
    expected.put(finishesDuringThePass, "terminal");
    // Everything above happened an hour ago, except the last run's latest event: just now.
    Db.update(
        "UPDATE workflow.workflow_runs SET updated_at = updated_at - interval '1 hour',"
            + " created_at = created_at - interval '1 hour'");
    Db.update("UPDATE workflow.workflow_events SET created_at = created_at - interval '1 hour'");
    // Locks too: a lock taken within the activity fence may be a live executor's (has-queued-job).
    Db.update(
        "UPDATE graphile_worker._private_jobs SET locked_at = locked_at - interval '1 hour'"
            + " WHERE locked_at IS NOT NULL");
    Db.update(
        "UPDATE workflow.workflow_events SET created_at = now() AT TIME ZONE 'UTC'"
            + " WHERE id = (SELECT max(id) FROM workflow.workflow_events WHERE run_id = ?)",
        finishesDuringThePass);

    Instance live = api.register("engine", "workers", "live", List.of(LIVE_WORKER));
    Instance booting = api.register("engine", UUID.randomUUID().toString(), "booting");
    Set<String> handedOut = new HashSet<>();
    Batch first = api.claimBatch(booting, 5000);
    handedOut.addAll(first.runIds());
    first
        .json()
        .get("runs")
        .forEach(
            r ->
                assertEquals("__wkf_workflow_" + runs.workflowName(), r.get("queueName").asText()));
    api.complete(booting, first, List.of()).expect(200);
    // The recently active run finishes; its re-check falls due.
    Db.update(
        "UPDATE workflow.workflow_runs SET status = 'completed' WHERE id = ?",
        finishesDuringThePass);
    Db.update("UPDATE rollcall.deferred SET deferred_at = now() - interval '1 minute'");
    api.drain(booting, 5000).forEach(b -> handedOut.addAll(b.runIds()));
    api.heartbeat(live).expect(200);

    Map<String, String> actual = new LinkedHashMap<>();
    for (String run : expected.keySet()) {
      List<String> reasons =
          Db.column(
              "SELECT reason FROM rollcall.ledger WHERE run_id = ? AND epoch_id = ?"
                  + " ORDER BY id DESC LIMIT 1",
              run,
              first.epochId());
      actual.put(run, reasons.isEmpty() ? "(not in the pass)" : reasons.get(0));
    }
    assertEquals(expected, actual, "verdicts on " + version);
    Set<String> redrive = new HashSet<>();
    expected.forEach(
        (run, reason) -> {
          if (List.of("pending", "interrupted-step", "due-wait", "no-live-wake-path")
              .contains(reason)) {
            redrive.add(run);
          }
        });
    assertEquals(redrive, handedOut, "handed out = needs a re-drive (precision and recall 100 %)");

    // The engine's own enqueue of a handed-out run is recognised as its wake path by the next pass.
    String redriven = expected.keySet().iterator().next();
    EngineFixture.enqueueAsEngine(db, version, redriven, runs.workflowName());
    Instance next = api.register("engine", UUID.randomUUID().toString(), "next-deploy");
    api.drain(next, 5000);
    assertEquals(
        List.of("has-queued-job"),
        Db.column(
            "SELECT l.reason FROM rollcall.ledger l JOIN rollcall.epochs e ON e.id = l.epoch_id"
                + " WHERE l.run_id = ? AND e.deployment_id = ?",
            redriven,
            next.deploymentId()));
    System.out.printf("engine %s: %d states, verdicts as expected%n", version, expected.size());
  }
}
