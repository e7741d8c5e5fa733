package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;

import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Batch;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import dev.rollcall.testing.TimeTravel;
import jakarta.inject.Inject;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Runs a live peer is executing, or that the engine just touched, are not re-driven. */
@ServiceTest
class OwnerAwareTest extends ApiTestBase {

  @Inject Reaper reaper;

  String deploy;

  @BeforeEach
  void freshDeploy() {
    deploy = UUID.randomUUID().toString();
  }

  String someActiveRun() {
    return Db.activeRuns(SourceTables.SMALL).stream().sorted().toList().get(3);
  }

  /** Claims and completes until done; returns every run handed out. */
  Set<String> drain(Instance claimer) {
    Set<String> out = new HashSet<>();
    api.drain(claimer, 100).forEach(b -> out.addAll(b.runIds()));
    return out;
  }

  @Test
  void aRunInALiveInstancesInFlightSetIsNotHandedOutAndIsSkippedIfStillOwnedAtTheEnd() {
    String owned = someActiveRun();
    Instance owner = api.register(SourceTables.SMALL, "old-deploy", "owner");
    api.heartbeat(owner, List.of(owned)).expect(200);
    Instance booting = api.register(SourceTables.SMALL, deploy, "booting");

    Set<String> handedOut = drain(booting);

    assertFalse(handedOut.contains(owned));
    Set<String> expected = new HashSet<>(Db.activeRuns(SourceTables.SMALL));
    expected.remove(owned);
    assertEquals(expected, handedOut);
    assertEquals(
        List.of("deferred:owned-by-live-instance", "skipped:owned-by-live-instance"),
        Db.column(
            "SELECT l.outcome || ':' || l.reason FROM rollcall.ledger l"
                + " JOIN rollcall.epochs e ON e.id = l.epoch_id"
                + " WHERE e.deployment_id = ? AND l.run_id = ? ORDER BY l.id",
            deploy,
            owned));
  }

  /** A run a live owner of an older deploy reports, deferred by the first batch of this deploy. */
  record Deferred(String run, Instance owner, Instance booting, Batch first) {}

  Deferred deferredByTheBootPass() {
    String owned = someActiveRun();
    Instance owner = api.register(SourceTables.SMALL, "old-deploy", "owner");
    api.heartbeat(owner, List.of(owned)).expect(200);
    Instance booting = api.register(SourceTables.SMALL, deploy, "booting");
    Batch first = api.claimBatch(booting, 100);
    assertFalse(first.runIds().contains(owned));
    return new Deferred(owned, owner, booting, first);
  }

  @Test
  void aRunTheOwnerDropsBeforeTheEpochClosesIsHandedOut() {
    Deferred d = deferredByTheBootPass();
    String owned = d.run();
    Instance owner = d.owner();
    Instance booting = d.booting();
    Batch first = d.first();

    api.heartbeat(owner, List.of()).expect(200);
    api.complete(booting, first, List.of()).expect(200);
    Batch second = api.claimBatch(booting, 100);

    assertEquals(List.of(owned), second.runIds());
    assertEquals("unclassified", second.json().get("runs").get(0).get("reason").asText());
    api.complete(booting, second, List.of()).expect(200);
    assertNull(api.claimBatch(booting, 100));
  }

  /**
   * The pass deferred a run its live owner was executing; the owner died before the re-check, and
   * its takeover handed the run out. The re-check, which sees no live owner, leaves the run to the
   * takeover whether the takeover's hand-out is still leased ({@code heldByTakeover}) or completed.
   */
  @ParameterizedTest
  @ValueSource(booleans = {true, false})
  void aRunItsDeadOwnersTakeoverHandedOutIsNotHandedOutAgainByThePassReCheck(
      boolean heldByTakeover) {
    Deferred d = deferredByTheBootPass();
    String owned = d.run();
    Instance owner = d.owner();
    Instance booting = d.booting();
    Batch first = d.first();

    // The owner dies before the re-check: its takeover opens with the run in a batch.
    TimeTravel.leaseExpired(owner);
    reaper.runOnce().await().indefinitely();
    // A claim serves the namespace's takeovers first.
    Batch takeover = api.claimBatch(booting, 100);
    assertEquals(List.of(owned), takeover.runIds(), "the takeover hands the run out");
    if (!heldByTakeover) {
      api.complete(booting, takeover, List.of()).expect(200);
    }
    api.complete(booting, first, List.of()).expect(200);

    Set<String> reChecked = drain(booting);

    assertFalse(reChecked.contains(owned), "the pass's re-check handed the run out again");
    assertEquals(
        List.of("skipped:handed-out-elsewhere"),
        Db.column(
            "SELECT l.outcome || ':' || l.reason FROM rollcall.ledger l"
                + " JOIN rollcall.epochs e ON e.id = l.epoch_id"
                + " WHERE e.deployment_id = ? AND l.run_id = ? AND l.outcome <> 'deferred'",
            deploy,
            owned));
    if (heldByTakeover) {
      api.complete(booting, takeover, List.of()).expect(200);
    }
  }

  /**
   * An owner whose lease ran out is no less an owner until its death is declared (a lease that ran
   * out is no evidence of death): the pass leaves its run alone, and the takeover opened when the
   * death is declared hands it out, once.
   */
  @Test
  void aRunOfAnOwnerWhoseLeaseRanOutIsLeftToItsTakeover() {
    String owned = someActiveRun();
    Instance owner = api.register(SourceTables.SMALL, "old-deploy", "owner");
    api.heartbeat(owner, List.of(owned)).expect(200);
    TimeTravel.leaseExpired(owner);
    Instance booting = api.register(SourceTables.SMALL, deploy, "booting");

    Set<String> handedOut = drain(booting);

    assertFalse(handedOut.contains(owned), "handed out before its owner was declared dead");
    reaper.runOnce().await().indefinitely();
    Batch takeover = api.claimBatch(booting, 100);
    assertEquals(List.of(owned), takeover.runIds());
    assertEquals("owner-dead", takeover.json().get("runs").get(0).get("reason").asText());
    api.complete(booting, takeover, List.of()).expect(200);
    api.leave(booting).expect(204);
  }

  @Test
  void inFlightSetsReplaceTheLastOneAndAreIndexedBothWays() {
    Instance owner = api.register(SourceTables.SMALL, deploy, "owner");
    api.heartbeat(owner, List.of("wrun_a", "wrun_b", "wrun_a")).expect(200);
    api.heartbeat(owner, List.of("wrun_b", "wrun_c")).expect(200);
    api.heartbeat(owner).expect(200); // no set: unchanged

    assertEquals(
        List.of("wrun_b", "wrun_c"),
        Db.column(
            "SELECT run_id FROM rollcall.ownership WHERE instance_id = ? ORDER BY run_id",
            owner.id()));
  }

  @Test
  void inFlightEntriesMayCarryTheirQueueMessageIdsAndOneRunMayHaveSeveral() {
    Instance owner = api.register(SourceTables.SMALL, deploy, "owner");
    api.heartbeatEntries(
            owner,
            List.of(
                Api.execution("wrun_a", "msg_replay"),
                Api.execution("wrun_a", "msg_step"),
                Api.execution("wrun_b", null),
                Api.JSON.getNodeFactory().textNode("wrun_c")))
        .expect(200);
    assertEquals(
        List.of("wrun_a", "wrun_b", "wrun_c"),
        Db.column(
            "SELECT run_id FROM rollcall.ownership WHERE instance_id = ? ORDER BY run_id",
            owner.id()));
    assertEquals(
        List.of("msg_replay:wrun_a", "msg_step:wrun_a"),
        Db.column(
            "SELECT message_id || ':' || run_id FROM rollcall.ownership_messages"
                + " WHERE instance_id = ? ORDER BY message_id",
            owner.id()));

    // Replace semantics for messages too; a kept message keeps its first report time.
    String firstReport =
        Db.column(
                "SELECT reported_at::text FROM rollcall.ownership_messages"
                    + " WHERE instance_id = ? AND message_id = 'msg_step'",
                owner.id())
            .get(0);
    api.heartbeatEntries(owner, List.of(Api.execution("wrun_a", "msg_step"))).expect(200);
    assertEquals(
        List.of("msg_step:" + firstReport),
        Db.column(
            "SELECT message_id || ':' || reported_at::text FROM rollcall.ownership_messages"
                + " WHERE instance_id = ?",
            owner.id()));
    api.leave(owner).expect(204);
    assertEquals(
        0,
        Db.number(
            "SELECT count(*) FROM rollcall.ownership_messages WHERE instance_id = ?", owner.id()));
  }

  @Test
  void anOversizedInFlightSetIsRefusedAndChangesNothing() {
    Instance owner = api.register(SourceTables.SMALL, deploy, "owner");
    api.heartbeat(owner, List.of("wrun_keep")).expect(200);
    List<String> huge = new ArrayList<>();
    for (int i = 0; i <= 10_000; i++) {
      huge.add("wrun_" + i);
    }

    Api.Reply r = api.heartbeat(owner, huge).expect(400);

    assertEquals("urn:rollcall:problem:invalid-request", r.text("type"));
    assertEquals(
        List.of("wrun_keep"),
        Db.column("SELECT run_id FROM rollcall.ownership WHERE instance_id = ?", owner.id()));
  }

  @Test
  void aRecentlyActiveRunWaitsForTheActivityFenceAndIsThenHandedOutIfQuiet() {
    String table = SourceTables.table(SourceTables.ACTIVE);
    String quiet = "wrun_q_" + deploy;
    String busy = "wrun_b_" + deploy;
    Db.update(
        "INSERT INTO "
            + table
            + " (id, workflow_name, status, updated_at) VALUES"
            + " (?, 'w', 'running', now()), (?, 'w', 'running', now())",
        quiet,
        busy);
    Instance booting = api.register(SourceTables.ACTIVE, deploy, "booting");

    Api.Reply first = api.claim(booting, 5000).expect(200);
    // Every active run of the table may be handed out except the two just touched.
    if (first.text("status").equals("batch")) {
      Batch b = Api.batch(first.body().get("batch"));
      assertFalse(b.runIds().contains(quiet) || b.runIds().contains(busy));
      api.complete(booting, b, List.of()).expect(200);
    }
    Api.Reply waiting = api.claim(booting, 5000).expect(200);
    assertEquals("wait", waiting.text("status"), "deferred runs are not due yet");

    // Time passes (by the database's clock): the deferral is due; one run stayed busy.
    Db.update(
        "UPDATE rollcall.deferred SET deferred_at = now() - interval '1 minute' WHERE run_id IN (?, ?)",
        quiet,
        busy);
    Db.update(
        "UPDATE " + table + " SET updated_at = now() - interval '1 minute' WHERE id = ?", quiet);
    Batch later = api.claimBatch(booting, 5000);

    assertEquals(List.of(quiet), later.runIds());
    api.complete(booting, later, List.of()).expect(200);
    assertNull(api.claimBatch(booting, 5000));
    assertEquals(
        List.of("skipped"),
        Db.column(
            "SELECT outcome FROM rollcall.ledger WHERE run_id = ? AND outcome <> 'deferred'",
            busy));
    Db.update("UPDATE " + table + " SET status = 'completed' WHERE id IN (?, ?)", quiet, busy);
  }

  @Test
  void anInFlightSetGivenAtRegistrationProtectsTheInstancesOwnRunsFromItsFirstClaim() {
    String own = someActiveRun();
    com.fasterxml.jackson.databind.node.ObjectNode body =
        Api.JSON
            .createObjectNode()
            .put("namespace", SourceTables.SMALL)
            .put("deploymentId", deploy)
            .put("name", "restarting");
    body.putArray("inFlight").add(own);
    Api.Reply r = api.post("instances", SourceTables.secret(SourceTables.SMALL), body).expect(201);
    Instance self =
        new Instance(
            UUID.fromString(r.text("instanceId")), r.text("token"), SourceTables.SMALL, deploy);

    Batch first = api.claimBatch(self, 100);

    assertFalse(first.runIds().contains(own));
    api.heartbeat(self, List.of()).expect(200);
    api.complete(self, first, List.of()).expect(200);
    assertEquals(List.of(own), api.claimBatch(self, 100).runIds());
  }
}
