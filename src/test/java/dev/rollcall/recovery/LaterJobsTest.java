package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Batch;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.Api.Reply;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.EngineRuns;
import dev.rollcall.testing.EngineVersion;
import dev.rollcall.testing.RollcallTestResource;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import dev.rollcall.testing.TimeTravel;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A pass decodes the engine's queue once, when it opens; the engine goes on queueing messages after
 * that. A run it wrote to and gave a job since (a sleep's wake-up, queued as the delivery that
 * slept ended) is not taken for one without a wake path: the pass reads the jobs queued after its
 * decode for such runs, and skips the run ({@code has-queued-job}) rather than hand it out beside
 * that job, two replays at once.
 */
@ServiceTest
class LaterJobsTest extends ApiTestBase {

  EngineRuns runs;
  String deploy;

  @BeforeEach
  void fresh() {
    runs = EngineRuns.on(RollcallTestResource.database(), EngineVersion.STABLE);
    deploy = UUID.randomUUID().toString();
  }

  @Test
  void aRunTheEngineGaveAJobAfterThePassOpenedIsNotHandedOutByItsReCheck() {
    // The engine has just written to the run: the pass defers it (recently active).
    String run = runs.dueWait();
    Instance booting = api.register(SourceTables.ENGINE, deploy, "booting");
    List<Batch> first = new ArrayList<>();
    while (Passes.ledger(deploy, run).isEmpty()) {
      Reply r = api.claim(booting, 5000).expect(200);
      if (r.text("status").equals("batch")) {
        first.add(Api.batch(r.body().get("batch")));
      }
    }
    assertEquals(List.of("deferred:recently-active"), Passes.ledger(deploy, run));

    // The delivery that wrote to it slept and queued the wake-up (after the pass opened and
    // decoded the queue); the engine has been quiet since, long enough for the re-check.
    long job =
        Db.number(
            "SELECT id FROM graphile_worker.add_job(?, ?::json, max_attempts => 3)",
            runs.flowsTask(),
            EngineRuns.flowsPayload("msg_" + EngineRuns.ulid(), runs.workflowName(), run, 2));
    TimeTravel.engineQuiet(run);
    TimeTravel.deferredAnHourAgo(run);
    Db.update(
        "UPDATE rollcall.epochs SET snapshot_at = snapshot_at - interval '2 hours'"
            + " WHERE kind = 'boot' AND deployment_id = ?",
        deploy);
    assertTrue(
        job
            > Db.number(
                "SELECT wake_jobs_through FROM rollcall.epochs WHERE kind = 'boot'"
                    + " AND deployment_id = ?",
                deploy),
        "the wake-up is not in the pass's decode");
    for (Batch b : first) {
      api.complete(booting, b, List.of()).expect(200);
    }

    List<Batch> rest = api.drain(booting, 5000);

    assertFalse(
        rest.stream().anyMatch(b -> b.runIds().contains(run)),
        "handed out beside the engine's wake-up");
    assertEquals(
        List.of("deferred:recently-active", "skipped:has-queued-job"), Passes.ledger(deploy, run));
    api.leave(booting).expect(204);
  }
}
