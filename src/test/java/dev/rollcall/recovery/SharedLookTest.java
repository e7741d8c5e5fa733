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
    try (Connection lock =
        Db.holding("SELECT 1 FROM rollcall.instances WHERE id = ? FOR UPDATE", stuck.id())) {
      older = CompletableFuture.supplyAsync(() -> api.claim(stuck, 10));
      Poll.until(
          "the older look waits for its instance's row",
          Duration.ofSeconds(10),
          () ->
              Db.number(
                      "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                          + " AND query LIKE '%FROM rollcall.instances%FOR KEY SHARE%'")
                  == 1);

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
