package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Batch;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import org.junit.jupiter.api.Test;

@ServiceTest
class BootRecoveryTest extends ApiTestBase {

  @Test
  void oneInstanceRecoversEveryActiveRunOnceAndThenIsDone() {
    Instance a = api.register(SourceTables.SMALL, UUID.randomUUID().toString(), "a");
    Set<String> handedOut = new HashSet<>();
    List<Batch> batches = new ArrayList<>();
    for (Batch b; (b = api.claimBatch(a, 7)) != null; ) {
      batches.add(b);
      b.runIds().forEach(id -> assertTrue(handedOut.add(id), "handed out twice: " + id));
      api.complete(a, b, List.of()).expect(200);
    }
    assertEquals(Db.activeRuns(SourceTables.SMALL), handedOut);
    assertTrue(batches.size() >= 5, "30 runs in pages of 7: " + batches.size());
    long epoch = batches.get(0).epochId();
    assertEquals(
        "closed", Db.column("SELECT state FROM rollcall.epochs WHERE id = ?", epoch).get(0));
  }

  @Test
  void aRunsReasonSaysWhetherItHadStarted() {
    Instance a = api.register(SourceTables.SMALL, UUID.randomUUID().toString(), "a");
    Batch b = api.claimBatch(a, 100);
    Set<String> pending =
        Db.set(
            "SELECT id FROM "
                + SourceTables.table(SourceTables.SMALL)
                + " WHERE status = 'pending'");
    b.json()
        .get("runs")
        .forEach(
            run -> {
              String expected =
                  pending.contains(run.get("runId").asText()) ? "pending" : "unclassified";
              assertEquals(expected, run.get("reason").asText());
              assertEquals(
                  "__wkf_workflow_" + run.get("workflowName").asText(),
                  run.get("queueName").asText());
            });
  }

  @Test
  void anInstanceOfAnAlreadyRecoveredDeployIsDoneAtOnceWithoutAScan() {
    String deploy = UUID.randomUUID().toString();
    Instance a = api.register(SourceTables.SMALL, deploy, "a");
    api.drain(a, 100);
    long batchesBefore = Db.number("SELECT count(*) FROM rollcall.batches");
    long scannedBefore = Db.number("SELECT sum(runs_scanned) FROM rollcall.epochs");

    Instance late = api.register(SourceTables.SMALL, deploy, "late");
    Api.Reply r = api.claim(late, 100).expect(200);

    assertEquals("done", r.text("status"));
    assertEquals(batchesBefore, Db.number("SELECT count(*) FROM rollcall.batches"));
    assertEquals(scannedBefore, Db.number("SELECT sum(runs_scanned) FROM rollcall.epochs"));
  }

  @Test
  void runsCreatedAfterTheSnapshotAreNotPartOfTheEpoch() {
    int first = 1_000_000 + (int) (Math.random() * 1_000_000) * 10;
    SourceTables.insertRuns(
        dev.rollcall.testing.RollcallTestResource.database(), SourceTables.GROWING, first, 10, 0);
    Instance a = api.register(SourceTables.GROWING, UUID.randomUUID().toString(), "a");
    Batch b = api.claimBatch(a, 3);
    Set<String> before = Db.activeRuns(SourceTables.GROWING);
    // Runs created now, after the epoch's snapshot: some with larger ids, which the id bound
    // excludes, and one with a smaller id, which only the created-at bound excludes.
    SourceTables.insertRuns(
        dev.rollcall.testing.RollcallTestResource.database(),
        SourceTables.GROWING,
        first + 1000,
        5,
        0);
    Db.update(
        "INSERT INTO "
            + SourceTables.table(SourceTables.GROWING)
            + " (id, workflow_name, status) VALUES (?, 'late', 'running')",
        "wrun_" + String.format("%010d", first + 5) + "a");
    Set<String> handedOut = new HashSet<>(b.runIds());
    api.complete(a, b, List.of()).expect(200);
    api.drain(a, 3).forEach(batch -> handedOut.addAll(batch.runIds()));
    Set<String> expected = new HashSet<>(before);
    assertEquals(expected, handedOut);
  }

  @Test
  void aBatchIsNeverEmpty() {
    Instance a = api.register(SourceTables.SMALL, UUID.randomUUID().toString(), "a");
    for (Batch b; (b = api.claimBatch(a, 10)) != null; ) {
      assertTrue(!b.runIds().isEmpty());
      api.complete(a, b, List.of()).expect(200);
    }
    assertNull(api.claimBatch(a, 10));
  }
}
