package dev.rollcall.admin;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Batch;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.RollcallTestResource;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import dev.rollcall.testing.TimeTravel;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

@ServiceTest
class AdminApiTest extends ApiTestBase {

  static final String TOKEN = RollcallTestResource.ADMIN_TOKEN;

  String deploy;

  @BeforeEach
  void freshDeploy() {
    deploy = UUID.randomUUID().toString();
  }

  Api.Reply get(String path) {
    return api.send("GET", path, TOKEN, null);
  }

  /** Runs a whole boot pass of the small namespace with two instances; returns its epoch. */
  long bootPass() {
    Instance a = api.register(SourceTables.SMALL, deploy, "a");
    Instance b = api.register(SourceTables.SMALL, deploy, "b");
    long epoch = -1;
    boolean turn = false;
    for (Batch batch; (batch = api.claimBatch((turn = !turn) ? a : b, 7)) != null; ) {
      api.complete(turn ? a : b, batch, List.of()).expect(200);
      epoch = batch.epochId();
    }
    return epoch;
  }

  @Test
  void everyAdminCallNeedsTheAdminToken() {
    for (String path : List.of("admin/namespaces", "admin/instances", "admin/epochs")) {
      Api.Reply none = api.send("GET", path, null, null).expect(401);
      assertEquals("urn:rollcall:problem:unauthorized", none.text("type"));
      api.send("GET", path, "wrong", null).expect(403);
      api.send("GET", path, SourceTables.secret(SourceTables.SMALL), null).expect(403);
    }
  }

  @Test
  void anEpochsProgressMatchesWhatWasHandedOut() {
    long epoch = bootPass();

    JsonNode view = get("admin/epochs/" + epoch).expect(200).body();

    long active = Db.activeRuns(SourceTables.SMALL).size();
    assertEquals("boot", view.get("kind").asText());
    assertEquals("closed", view.get("state").asText());
    assertEquals(active, view.get("runs").get("handedOut").asLong());
    assertEquals(active, view.get("runs").get("enqueued").asLong());
    assertEquals(active, view.get("runsScanned").asLong());
    long batches = view.get("batches").get("completed").asLong();
    assertEquals((active + 6) / 7, batches);
    assertEquals(2, view.get("claimers").size());
    long byReason = 0;
    for (JsonNode n : view.get("handedOutByReason")) {
      byReason += n.asLong();
    }
    assertEquals(active, byReason);
    JsonNode page = get("admin/epochs/" + epoch + "/batches?limit=2").expect(200).body();
    assertEquals(2, page.get("items").size());
    assertNotNull(page.get("nextCursor").asText());
    JsonNode first = page.get("items").get(0);
    assertEquals(
        1,
        Db.number(
            "SELECT count(*) FROM rollcall.batches WHERE id = ? AND epoch_id = ? AND state = ?"
                + " AND fence = ? AND attempts = ? AND claimer_id = ?::uuid AND run_count = ?"
                + " AND created_at = ?::timestamptz AND completed_at = ?::timestamptz"
                + " AND retry_of IS NULL",
            first.get("id").asLong(),
            epoch,
            first.get("state").asText(),
            first.get("fence").asInt(),
            first.get("attempts").asInt(),
            first.get("claimerId").asText(),
            first.get("runCount").asInt(),
            first.get("createdAt").asText(),
            first.get("completedAt").asText()));
  }

  @Test
  void whileBatchesAreLeasedTheReasonsAndTheClaimersAgreeWithTheRunsHandedOut() {
    Instance a = api.register(SourceTables.SMALL, deploy, "a");
    Instance b = api.register(SourceTables.SMALL, deploy, "b");
    Batch ofA = api.claimBatch(a, 7);
    Batch ofB = api.claimBatch(b, 5);

    JsonNode view = get("admin/epochs/" + ofA.epochId()).expect(200).body();

    // Both batches in flight: nothing of them is in the ledger yet.
    assertEquals(2, view.get("batches").get("leased").asLong());
    assertEquals(12, view.get("runs").get("handedOut").asLong());
    long byReason = 0;
    for (JsonNode n : view.get("handedOutByReason")) {
      byReason += n.asLong();
    }
    assertEquals(12, byReason, view.toString());
    Map<String, String> claimers = new HashMap<>();
    for (JsonNode c : view.get("claimers")) {
      claimers.put(c.get("instanceId").asText(), c.get("batches") + "/" + c.get("runs"));
    }
    assertEquals(Map.of(a.id().toString(), "1/7", b.id().toString(), "1/5"), claimers);

    // One completed, one still leased: the written hand-outs and those in flight add up.
    api.complete(a, ofA, List.of()).expect(200);
    view = get("admin/epochs/" + ofA.epochId()).expect(200).body();
    assertEquals(12, view.get("runs").get("handedOut").asLong());
    assertEquals(2, view.get("claimers").size(), view.toString());
    api.complete(b, ofB, List.of()).expect(200);
    api.drain(a, 100);
  }

  @Test
  void anInstanceShowsItsRowAsTheDatabaseHasItAndItsStateByTheDatabasesClock() {
    Instance live = api.register(SourceTables.SMALL, deploy, "mapped", List.of("w-2", "w-1"));
    api.heartbeat(live, List.of(Db.activeRuns(SourceTables.SMALL).iterator().next())).expect(200);
    Instance expired = api.register(SourceTables.SMALL, deploy, "expired");
    TimeTravel.leaseExpired(expired);

    JsonNode shown = instance(get("admin/instances?namespace=small").expect(200).body(), live);

    assertEquals("live", shown.get("state").asText());
    assertEquals(1, shown.get("inFlight").asLong());
    assertEquals("[\"w-2\",\"w-1\"]", shown.get("workerIds").toString());
    assertTrue(shown.get("endedAt").isNull());
    // Every value read through the entity is the row's own, to the microsecond.
    assertEquals(
        1,
        Db.number(
            "SELECT count(*) FROM rollcall.instances WHERE id = ?::uuid AND namespace = ?"
                + " AND deployment_id = ? AND name = ? AND registered_at = ?::timestamptz"
                + " AND last_heartbeat_at = ?::timestamptz AND lease_expires_at = ?::timestamptz",
            shown.get("id").asText(),
            shown.get("namespace").asText(),
            shown.get("deploymentId").asText(),
            shown.get("name").asText(),
            shown.get("registeredAt").asText(),
            shown.get("lastHeartbeatAt").asText(),
            shown.get("leaseExpiresAt").asText()));
    // Stored as live, its lease ran out: dead by the database's clock, before the reaper acts.
    JsonNode dead = get("admin/instances?namespace=small&state=dead").expect(200).body();
    assertEquals("dead", instance(dead, expired).get("state").asText());
    assertNull(instance(dead, live));
  }

  static JsonNode instance(JsonNode page, Instance wanted) {
    for (JsonNode i : page.get("items")) {
      if (i.get("id").asText().equals(wanted.id().toString())) {
        return i;
      }
    }
    return null;
  }

  @Test
  void listsArePagedInAStableOrder() {
    for (int i = 0; i < 5; i++) {
      api.register(SourceTables.GROWING, deploy, "paged-" + i);
    }
    Set<String> seen = new HashSet<>();
    String cursor = null;
    int pages = 0;
    do {
      JsonNode page =
          get("admin/instances?namespace=growing&limit=2"
                  + (cursor == null ? "" : "&cursor=" + cursor))
              .expect(200)
              .body();
      page.get("items").forEach(i -> assertTrue(seen.add(i.get("id").asText()), "repeated"));
      cursor = page.get("nextCursor").isNull() ? null : page.get("nextCursor").asText();
      pages++;
    } while (cursor != null && pages < 100);
    assertEquals(
        Db.number("SELECT count(*) FROM rollcall.instances WHERE namespace = 'growing'"),
        seen.size());
    get("admin/instances?cursor=not-a-cursor").expect(400);
    get("admin/instances?limit=0").expect(400);
    get("admin/epochs?kind=bogus").expect(400);
  }

  @Test
  void namespacesShowInstancesAndTheLastBootEpoch() {
    long epoch = bootPass();

    JsonNode small = null;
    for (JsonNode ns : get("admin/namespaces").expect(200).body().get("items")) {
      if (ns.get("name").asText().equals(SourceTables.SMALL)) {
        small = ns;
      }
    }
    assertEquals(epoch, small.get("lastBootEpoch").get("id").asLong());
    assertTrue(small.get("instances").get("live").asLong() >= 2);
    assertTrue(small.get("bootRecovery").asBoolean());
    assertEquals("table", small.get("sourceKind").asText());
  }

  JsonNode namespace(String name) {
    for (JsonNode ns : get("admin/namespaces").expect(200).body().get("items")) {
      if (ns.get("name").asText().equals(name)) {
        return ns;
      }
    }
    return null;
  }

  @Test
  void aRunsLedgerShowsEveryHandOutAndItsCurrentOwner() {
    bootPass();
    String run = Db.activeRuns(SourceTables.SMALL).iterator().next();
    Instance owner = api.register(SourceTables.SMALL, deploy, "owner");
    api.heartbeat(owner, List.of(run)).expect(200);

    JsonNode ledger = get("admin/runs/" + run + "?namespace=small").expect(200).body();

    assertEquals(owner.id().toString(), ledger.get("owner").get("instanceId").asText());
    JsonNode last = ledger.get("ledger").get(ledger.get("ledger").size() - 1);
    assertEquals("enqueued", last.get("outcome").asText());
    assertEquals("boot", last.get("epochKind").asText());
    get("admin/runs/" + run).expect(400);
    api.heartbeat(owner, List.of()).expect(200);
  }

  @Test
  void aRunsLedgerShowsARowRecordedOutsideAnyEpoch() {
    String run = "wrun_orphaned_" + UUID.randomUUID();
    // What the orphan release records: a lock released with no epoch.
    Db.update(
        "INSERT INTO rollcall.ledger (namespace, run_id, epoch_id, reason, outcome, detail)"
            + " VALUES ('small', ?, NULL, 'orphaned-lock', 'lock-released', 'released job 1')",
        run);

    JsonNode ledger = get("admin/runs/" + run + "?namespace=small").expect(200).body();

    JsonNode row = ledger.get("ledger").get(0);
    assertEquals("lock-released", row.get("outcome").asText());
    for (String field : List.of("epochId", "epochKind")) {
      JsonNode v = row.path(field);
      assertTrue(v.isNull() || v.isMissingNode(), field + " in " + row);
    }
  }

  @Test
  void anOperatorStartsAManualPassThatInstancesServe() {
    Instance a = api.register(SourceTables.SMALL, deploy, "a");
    api.drain(a, 5000);

    Api.Reply started =
        api.post(
                "admin/epochs",
                TOKEN,
                Api.JSON.createObjectNode().put("namespace", "small").put("kind", "manual"))
            .expect(201);
    api.post(
            "admin/epochs",
            TOKEN,
            Api.JSON.createObjectNode().put("namespace", "small").put("kind", "manual"))
        .expect(409);

    assertEquals("manual", started.text("kind"));
    Batch manual = api.claimBatch(a, 5000);
    assertEquals("manual", manual.json().get("epochKind").asText());
    api.complete(a, manual, List.of()).expect(200);
    assertNull(api.claimBatch(a, 5000));
    assertEquals(
        "closed",
        get("admin/epochs/" + started.body().get("id").asLong()).body().get("state").asText());
  }

  @Test
  void evictingAnInstanceFencesItAndOpensItsTakeover() {
    Instance victim = api.register(SourceTables.SMALL, deploy, "victim");
    api.heartbeat(victim, List.of(Db.activeRuns(SourceTables.SMALL).iterator().next())).expect(200);

    Api.Reply evicted =
        api.post("admin/instances/" + victim.id() + "/evict", TOKEN, null).expect(200);

    assertEquals("dead", evicted.text("state"));
    long takeover = evicted.body().get("takeoverEpochId").asLong();
    assertEquals("takeover", get("admin/epochs/" + takeover).body().get("kind").asText());
    api.heartbeat(victim).expect(410);
    api.post("admin/instances/" + victim.id() + "/evict", TOKEN, null).expect(409);
    api.post("admin/instances/" + UUID.randomUUID() + "/evict", TOKEN, null).expect(404);
    Instance peer = api.register(SourceTables.SMALL, deploy, "peer");
    api.drain(peer, 5000);
  }

  @Test
  void withBootRecoverySwitchedOffClaimsAreDoneAndNoPassStarts() {
    Api.Reply off =
        api.send("PUT", "admin/namespaces/growing/recovery", TOKEN, "{\"bootRecovery\":false}")
            .expect(200);
    assertEquals(false, off.body().get("bootRecovery").asBoolean());
    assertEquals(false, namespace(SourceTables.GROWING).get("bootRecovery").asBoolean());
    try {
      SourceTables.insertRuns(
          RollcallTestResource.database(), SourceTables.GROWING, 900_000_000, 3, 0);
      Instance a = api.register(SourceTables.GROWING, deploy, "a");

      Api.Reply r = api.claim(a, 100).expect(200);

      assertEquals("done", r.text("status"));
      assertEquals(
          0,
          Db.number(
              "SELECT count(*) FROM rollcall.epochs WHERE deployment_id = ? AND kind = 'boot'",
              deploy));
    } finally {
      api.send("PUT", "admin/namespaces/growing/recovery", TOKEN, "{\"bootRecovery\":true}")
          .expect(200);
      Db.update("UPDATE " + SourceTables.table(SourceTables.GROWING) + " SET status = 'completed'");
    }
    // Switched back on: the same row, updated (one row per namespace, stamped by the database).
    assertEquals(true, namespace(SourceTables.GROWING).get("bootRecovery").asBoolean());
    assertEquals(
        1,
        Db.number(
            "SELECT count(*) FROM rollcall.namespace_settings WHERE namespace = ?"
                + " AND boot_recovery AND updated_at > now() - interval '1 minute'",
            SourceTables.GROWING));
    api.send("PUT", "admin/namespaces/nope/recovery", TOKEN, "{\"bootRecovery\":true}").expect(404);
    api.send("PUT", "admin/namespaces/growing/recovery", TOKEN, "{}").expect(400);
  }
}
