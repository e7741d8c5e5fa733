package dev.rollcall.registry;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Batch;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import dev.rollcall.testing.TimeTravel;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Test;

@ServiceTest
class InstanceLifecycleTest extends ApiTestBase {

  @Test
  void registrationReturnsAnIdATokenAndTheLeaseTerms() {
    ObjectNode body =
        Api.JSON
            .createObjectNode()
            .put("namespace", SourceTables.SMALL)
            .put("deploymentId", "d1")
            .put("name", "web-1");
    body.putArray("workerIds").add("worker-a").add("worker-b");

    Api.Reply r = api.post("instances", SourceTables.secret(SourceTables.SMALL), body).expect(201);

    assertTrue(r.text("token").startsWith("rci_"));
    assertTrue(r.text("token").length() >= 4 + 43, "256 bits of base64url");
    assertEquals(10_000, r.body().get("leaseTtlMs").asLong());
    assertEquals(3_000, r.body().get("heartbeatIntervalMs").asLong());
    OffsetDateTime.parse(r.text("leaseExpiresAt"));
    UUID id = UUID.fromString(r.text("instanceId"));
    assertEquals(
        List.of("{worker-a,worker-b}"),
        Db.column("SELECT worker_ids FROM rollcall.instances WHERE id = ?", id));
  }

  @Test
  void theTokenIsStoredOnlyAsAHash() {
    Instance a = api.register(SourceTables.SMALL, "d1", "a");
    long matches =
        Db.number(
            "SELECT count(*) FROM rollcall.instances i WHERE position(? in i::text) > 0",
            a.token());
    assertEquals(0, matches);
    assertEquals(
        1,
        Db.number(
            "SELECT count(*) FROM rollcall.instances WHERE id = ? AND token_hash = sha256(?::bytea)",
            a.id(),
            a.token()));
  }

  @Test
  void aHeartbeatRenewsTheLease() {
    Instance a = api.register(SourceTables.SMALL, "d1", "a");
    Db.update(
        "UPDATE rollcall.instances SET lease_expires_at = now() + interval '1 second' WHERE id = ?",
        a.id());

    Api.Reply r = api.heartbeat(a).expect(200);

    OffsetDateTime renewed = OffsetDateTime.parse(r.text("leaseExpiresAt"));
    OffsetDateTime stored =
        OffsetDateTime.parse(
            Db.column(
                    "SELECT to_char(lease_expires_at AT TIME ZONE 'UTC',"
                        + " 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') FROM rollcall.instances WHERE id = ?",
                    a.id())
                .get(0));
    assertEquals(renewed.toInstant(), stored.toInstant());
    assertTrue(
        Db.number(
                "SELECT count(*) FROM rollcall.instances WHERE id = ?"
                    + " AND lease_expires_at > now() + interval '9 seconds'",
                a.id())
            == 1);
  }

  @Test
  void aHeartbeatSaysWhetherRecoveryWorkIsOpenForTheInstance() {
    Instance a = api.register(SourceTables.SMALL, UUID.randomUUID().toString(), "a");
    assertFalse(api.heartbeat(a).expect(200).body().get("recoveryPending").asBoolean());
    Batch b = api.claimBatch(a, 5);
    assertTrue(api.heartbeat(a).expect(200).body().get("recoveryPending").asBoolean());
    api.complete(a, b, List.of()).expect(200);
    api.drain(a, 50);
    assertFalse(api.heartbeat(a).expect(200).body().get("recoveryPending").asBoolean());
  }

  @Test
  void anInstanceWhoseLeaseExpiredIsFencedEverywhere() {
    Instance a = api.register(SourceTables.SMALL, UUID.randomUUID().toString(), "a");
    Batch b = api.claimBatch(a, 5);
    TimeTravel.leaseExpired(a, Duration.ofMillis(1));

    for (Api.Reply r :
        List.of(api.heartbeat(a), api.claim(a, 5), api.complete(a, b, List.of()), api.leave(a))) {
      r.expect(410);
      assertEquals("urn:rollcall:problem:instance-gone", r.text("type"));
      assertEquals(a.id().toString(), r.text("instanceId"));
    }
    assertEquals(
        "leased", Db.column("SELECT state FROM rollcall.batches WHERE id = ?", b.id()).get(0));
  }

  @Test
  void aLeftInstanceIsFencedAndLeavingTwiceIsHarmless() {
    Instance a = api.register(SourceTables.SMALL, "d1", "a");
    api.leave(a).expect(204);
    api.leave(a).expect(204);
    api.heartbeat(a).expect(410);
    api.claim(a, 5).expect(410);
    assertEquals(
        "left", Db.column("SELECT state FROM rollcall.instances WHERE id = ?", a.id()).get(0));
  }

  @Test
  void aTokenActsOnlyForItsOwnInstance() {
    Instance a = api.register(SourceTables.SMALL, "d1", "a");
    Instance b = api.register(SourceTables.SMALL, "d1", "b");

    Api.Reply r = api.post("instances/" + b.id() + "/heartbeat", a.token(), null).expect(403);
    assertEquals("urn:rollcall:problem:forbidden", r.text("type"));
    api.send("DELETE", "instances/" + b.id(), a.token(), null).expect(403);
    assertEquals(
        "live", Db.column("SELECT state FROM rollcall.instances WHERE id = ?", b.id()).get(0));
  }

  @Test
  void anInstanceHeartbeatingFasterThanItsRateLimitGets429WithRetryAfter() {
    Instance a = api.register(SourceTables.SMALL, "d1", "eager");
    int refused = 0;
    Api.Reply last = null;
    for (int i = 0; i < 25; i++) {
      Api.Reply r = api.heartbeat(a);
      if (r.status() == 429) {
        refused++;
        last = r;
      } else {
        r.expect(200);
      }
    }
    assertTrue(refused >= 10, "refused " + refused + " of 25 (5 a second, bursts of 10)");
    assertEquals("urn:rollcall:problem:rate-limited", last.text("type"));
    assertTrue(last.body().get("retryAfterMs").asLong() > 0);
  }
}
