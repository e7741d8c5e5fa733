package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Batch;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.Poll;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import dev.rollcall.testing.TimeTravel;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import jakarta.inject.Inject;
import java.sql.Connection;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The held claims of a deploy that its pass's close wakes together learn that the pass is over from
 * one look: the others take its "done" instead of each reading the database.
 */
@ServiceTest
class SharedLookTest extends ApiTestBase {

  @Inject Wakeups wakeups;
  @Inject ClaimService claims;
  @Inject MeterRegistry meters;

  private final String ns = SourceTables.SMALL;

  @Test
  void claimsThatTheCloseWokeTogetherShareOneLook() throws Exception {
    String deploy = UUID.randomUUID().toString();
    // One page covers the namespace: the scan is done and its only batch is leased.
    Instance holder = api.register(ns, deploy, "holder");
    Batch last = api.claimBatch(holder, 5000);
    List<Instance> peers =
        List.of(
            api.register(ns, deploy, "a"),
            api.register(ns, deploy, "b"),
            api.register(ns, deploy, "c"));
    double shared = shared();

    List<CompletableFuture<Api.Reply>> answers = waitingForTheLastBatch(peers);
    // The last complete closes the pass; its notice wakes the three at once.
    api.complete(holder, last, List.of()).expect(200);

    for (CompletableFuture<Api.Reply> answer : answers) {
      Api.Reply reply = answer.get(30, TimeUnit.SECONDS).expect(200);
      assertEquals("done", reply.text("status"));
      assertEquals(last.epochId(), reply.body().path("epochId").asLong());
    }
    // Each looking for itself, the counter would not move. (A notice of the batch's release may
    // wake one of them alone first: at least two are woken together by the close.)
    assertTrue(
        shared() >= shared + 1,
        "a claim woken with the others by the close took another's look: " + (shared() - shared));
  }

  /**
   * A look of the deploy that began before the close's notice may have read the database before the
   * close (or, after a lost listener connection, before work came back): claims the notice woke do
   * not take its answer. Here that older look is stuck behind a lock on its instance's row; the
   * woken claims answer without it. Sharing any look under way, they would wait for it.
   */
  @Test
  void wokenClaimsDoNotShareALookThatBeganBeforeTheirWake() throws Exception {
    String deploy = UUID.randomUUID().toString();
    Instance holder = api.register(ns, deploy, "holder");
    Batch last = api.claimBatch(holder, 5000);
    List<Instance> peers = List.of(api.register(ns, deploy, "a"), api.register(ns, deploy, "b"));
    Instance stuck = api.register(ns, deploy, "stuck");

    List<CompletableFuture<Api.Reply>> answers = waitingForTheLastBatch(peers);

    // A look of the deploy that begins now, before the close, and cannot end: its liveness check
    // (FOR KEY SHARE on its instance's row) waits for this connection.
    CompletableFuture<Api.Reply> older;
    try (Connection lock = holdingRowOf(stuck)) {
      older = CompletableFuture.supplyAsync(() -> api.claim(stuck, 10));
      untilALookWaitsForItsInstanceRow("the older look waits for its instance's row");

      // The last complete closes the pass; its notice wakes the two held claims.
      api.complete(holder, last, List.of()).expect(200);
      for (CompletableFuture<Api.Reply> answer : answers) {
        Api.Reply reply = answer.get(15, TimeUnit.SECONDS).expect(200);
        assertEquals("done", reply.text("status"));
      }
      assertFalse(older.isDone(), "the older look was to be still stuck");
      lock.rollback();
    }
    assertEquals("done", older.get(15, TimeUnit.SECONDS).expect(200).text("status"));
  }

  /**
   * The look the others share may be one whose own instance is no longer live: it fails (410), and
   * the claims that waited for it look for themselves. Here the fenced instance's claim waits
   * first, so the close wakes it first and the others take its look; that look is held on its
   * instance's row until the lease has run out. Were a shared failure passed on, the live peers
   * would be told that they are gone.
   */
  @Test
  void aSharedLookThatFailsForItsOwnInstanceDoesNotFailTheOthers() throws Exception {
    String deploy = UUID.randomUUID().toString();
    Instance holder = api.register(ns, deploy, "holder");
    Batch last = api.claimBatch(holder, 5000);
    Instance fenced = api.register(ns, deploy, "fenced");
    List<Instance> peers = List.of(api.register(ns, deploy, "a"), api.register(ns, deploy, "b"));
    // The fenced instance's claim waits first: the close wakes it (and starts its look) first.
    CompletableFuture<Api.Reply> fencedAnswer = waitingForTheLastBatch(List.of(fenced)).get(0);
    List<CompletableFuture<Api.Reply>> answers = waitingForTheLastBatch(peers);
    double shared = shared();

    try (Connection row = holdingRowOf(fenced)) {
      api.complete(holder, last, List.of()).expect(200);
      untilALookWaitsForItsInstanceRow("the fenced instance's look waits for its instance's row");
      // The peers were woken with it and wait for its look, not for rows of their own.
      Poll.until(
          "both peers wait for the fenced instance's look",
          Duration.ofSeconds(15),
          () -> claims.sharingLook(ns, deploy) == peers.size());
      for (CompletableFuture<Api.Reply> answer : answers) {
        assertFalse(answer.isDone(), "a peer answered without the look it was to share");
      }
      // Its lease runs out while its look waits, as a missed heartbeat would have it.
      try (var expire =
          row.prepareStatement(
              "UPDATE rollcall.instances SET lease_expires_at = now() - interval '1 second'"
                  + " WHERE id = ?")) {
        expire.setObject(1, fenced.id());
        expire.executeUpdate();
      }
      row.commit();
    }

    fencedAnswer.get(15, TimeUnit.SECONDS).expect(410);
    for (CompletableFuture<Api.Reply> answer : answers) {
      Api.Reply reply = answer.get(15, TimeUnit.SECONDS).expect(200);
      assertEquals("done", reply.text("status"));
      assertEquals(last.epochId(), reply.body().path("epochId").asLong());
    }
    assertEquals(shared, shared(), "a failed look's answer was shared");
  }

  /**
   * What the claim documents: a shared "done" reads no liveness, so an instance fenced while it
   * waited may be told "done" (no lease, no work) and learns that it was fenced from its next
   * heartbeat and its next claim.
   */
  @Test
  void anInstanceFencedWhileItWaitedMayBeToldDoneAndLearnsItAtItsNextHeartbeat() throws Exception {
    String deploy = UUID.randomUUID().toString();
    Instance holder = api.register(ns, deploy, "holder");
    Batch last = api.claimBatch(holder, 5000);
    // The live peer waits first: the close wakes it first, and its look is the one shared.
    CompletableFuture<Api.Reply> peerAnswer =
        waitingForTheLastBatch(List.of(api.register(ns, deploy, "a"))).get(0);
    Instance fenced = api.register(ns, deploy, "fenced");
    CompletableFuture<Api.Reply> fencedAnswer = waitingForTheLastBatch(List.of(fenced)).get(0);
    TimeTravel.leaseExpired(fenced);
    double shared = shared();

    api.complete(holder, last, List.of()).expect(200);

    assertEquals("done", peerAnswer.get(15, TimeUnit.SECONDS).expect(200).text("status"));
    assertEquals("done", fencedAnswer.get(15, TimeUnit.SECONDS).expect(200).text("status"));
    assertEquals(shared + 1, shared(), "the fenced instance looked for itself");
    api.heartbeat(fenced).expect(410);
    api.claim(fenced, 10).expect(410);
  }

  /** A connection holding the instance's row: a claim's liveness check waits for it. */
  private static Connection holdingRowOf(Instance instance) throws java.sql.SQLException {
    return Db.holding("SELECT 1 FROM rollcall.instances WHERE id = ? FOR UPDATE", instance.id());
  }

  /** Once one claim's liveness check (FOR KEY SHARE on its instance's row) waits for a lock. */
  private static void untilALookWaitsForItsInstanceRow(String what) {
    Poll.until(
        what,
        Duration.ofSeconds(10),
        () ->
            Db.number(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                        + " AND query LIKE '%FROM rollcall.instances%FOR KEY SHARE%'")
                == 1);
  }

  /** Held claims of the peers, once all of them wait (for the pass's last batch). */
  private List<CompletableFuture<Api.Reply>> waitingForTheLastBatch(List<Instance> peers) {
    int before = wakeups.waiting(ns);
    List<CompletableFuture<Api.Reply>> answers =
        peers.stream()
            .map(p -> CompletableFuture.supplyAsync(() -> api.claimHeld(p, 10, 20_000, false)))
            .toList();
    Poll.until(
        "the peers' claims wait for the pass's last batch",
        Duration.ofSeconds(10),
        () -> wakeups.waiting(ns) == before + peers.size());
    return answers;
  }

  private double shared() {
    return meters.find("rollcall.claims.looks.shared").tag("namespace", ns).counters().stream()
        .mapToDouble(Counter::count)
        .sum();
  }
}
