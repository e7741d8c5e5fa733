package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Batch;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.Poll;
import dev.rollcall.testing.RollcallTestResource;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import dev.rollcall.testing.TimeTravel;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * A claim cuts a key range under the epoch lock and classifies it after releasing the lock. A
 * claimer that stalls or dies in between must not lose the range's runs, nor hand them out twice.
 */
@ServiceTest
class ScanRangeTest extends ApiTestBase {

  @Test
  void aRangeWhoseClaimerStallsBeforeClassifyingGoesToTheNextClaimerAndTheLateOneWritesNothing()
      throws Exception {
    String deploy = UUID.randomUUID().toString();
    Instance a = api.register(SourceTables.SMALL, deploy, "a");
    Instance b = api.register(SourceTables.SMALL, deploy, "b");
    Set<String> active = Db.activeRuns(SourceTables.SMALL);

    TakenOver t = takenOverBeforeClassifying(a, b, range -> {});
    Batch taken = t.taken();
    assertEquals(2, taken.fence());
    // What b classified comes from the active runs, and b handed some out. (That every run of the
    // range shows up in this epoch is not asserted: in this shared namespace a run's skip is
    // written to the ledger once per reason since its last hand-out, possibly in another test's
    // epoch.)
    Set<String> others =
        Db.set(
            "SELECT l.run_id FROM rollcall.ledger l JOIN rollcall.epochs e ON e.id = l.epoch_id"
                + " WHERE e.deployment_id = ? AND l.outcome IN ('deferred', 'skipped')"
                + " UNION SELECT d.run_id FROM rollcall.deferred d"
                + " JOIN rollcall.epochs e ON e.id = d.epoch_id WHERE e.deployment_id = ?",
            deploy,
            deploy);
    Set<String> classified = new java.util.HashSet<>(taken.runIds());
    classified.addAll(others);
    assertTrue(active.containsAll(classified), classified + " not all in " + active);
    assertFalse(taken.runIds().isEmpty());
    Api.Reply lateReply = t.late().get(60, TimeUnit.SECONDS).expect(200);
    assertNotEquals("batch", lateReply.text("status"), "a's late classification hands out nothing");
    assertEquals(
        List.of(b.id().toString()),
        Db.column(
            "SELECT DISTINCT instance_id::text FROM rollcall.hand_outs_in_flight"
                + " WHERE batch_id = ?",
            range(deploy)),
        "only b's fence wrote hand-outs");
    assertEquals(
        lateTaken(deploy),
        Db.number(
            "SELECT count(*) FROM rollcall.hand_outs_in_flight h"
                + " JOIN rollcall.epochs e ON e.id = h.epoch_id WHERE e.deployment_id = ?",
            deploy),
        "every run handed out exactly once");
  }

  @Test
  void aRangeTakenOverTooOftenIsHandedOutUnclassifiedSoItCannotHoldItsEpochOpen() throws Exception {
    String deploy = UUID.randomUUID().toString();
    Instance a = api.register(SourceTables.SMALL, deploy, "a");
    Instance b = api.register(SourceTables.SMALL, deploy, "b");
    // A live instance of another deploy executes one run: classification would defer it.
    Instance owner = api.register(SourceTables.SMALL, UUID.randomUUID().toString(), "owner");
    String owned = "wrun_0000000002";
    api.heartbeat(owner, List.of(owned)).expect(200);

    Set<String> rangeRuns = new java.util.HashSet<>();
    TakenOver t =
        takenOverBeforeClassifying(
            a,
            b,
            range -> {
              // Taken over maxAttempts - 1 times already (claimers that died or failed
              // classifying it): the next take-over is one too many.
              Db.update("UPDATE rollcall.batches SET attempts = 4 WHERE id = ?", range);
              rangeRuns.addAll(
                  Db.set("SELECT unnest(scan_run_ids) FROM rollcall.batches WHERE id = ?", range));
            });
    Batch taken = t.taken();
    t.late().get(60, TimeUnit.SECONDS).expect(200);

    rangeRuns.retainAll(Db.activeRuns(SourceTables.SMALL));
    assertTrue(rangeRuns.contains(owned));
    assertEquals(rangeRuns, Set.copyOf(taken.runIds()), "every active run of the range, owned too");
    taken
        .json()
        .get("runs")
        .forEach(r -> assertEquals("unclassified", r.get("reason").asText(), r.toString()));
    // The owner stops executing and leaves, owning nothing: no takeover work for other tests.
    api.heartbeat(owner, List.of()).expect(200);
    api.leave(owner, List.of()).expect(204);
  }

  /**
   * A pass closed (superseded, or by an operator) while a claimer classifies a range of it: the
   * close gives the range up with the pass's batches, and the claimer's classification hands
   * nothing out of the closed pass.
   */
  @Test
  void aRangeWhosePassClosesBeforeItIsClassifiedHandsNothingOut() throws Exception {
    String deploy = UUID.randomUUID().toString();
    Instance a = api.register(SourceTables.SMALL, deploy, "a");
    long range;
    CompletableFuture<Api.Reply> late;
    try (Connection blocker = Db.database().connect()) {
      blocker.setAutoCommit(false);
      // Classification reads the ownership table; cutting a range does not (as above).
      try (Statement st = blocker.createStatement()) {
        st.execute("LOCK TABLE rollcall.ownership IN ACCESS EXCLUSIVE MODE");
      }
      late = CompletableFuture.supplyAsync(() -> api.claim(a, 100));
      range = awaitScanningRange(a);
      long epoch = Db.number("SELECT epoch_id FROM rollcall.batches WHERE id = ?", range);
      api.send("POST", "admin/epochs/" + epoch + "/close", RollcallTestResource.ADMIN_TOKEN, null)
          .expect(200);
      assertFalse(late.isDone(), "a's claim is still frozen before classifying");
      blocker.rollback();
    }

    Api.Reply reply = late.get(60, TimeUnit.SECONDS).expect(200);
    assertNotEquals("batch", reply.text("status"), "nothing handed out of a closed pass: " + reply);
    assertEquals(
        List.of("abandoned"), Db.column("SELECT state FROM rollcall.batches WHERE id = ?", range));
    assertEquals(
        0,
        Db.number(
                "SELECT count(*) FROM rollcall.hand_outs_in_flight h"
                    + " JOIN rollcall.epochs e ON e.id = h.epoch_id WHERE e.deployment_id = ?",
                deploy)
            + Db.number("SELECT count(*) FROM rollcall.ledger WHERE batch_id = ?", range),
        "no hand-out, in flight or written");
  }

  /** A range cut by a late claimer and classified by the claimer that took it over. */
  private record TakenOver(long range, CompletableFuture<Api.Reply> late, Batch taken) {}

  /**
   * {@code a}'s claim cuts a range and is frozen before classifying it; {@code beforeTakeOver} runs
   * on the range; a's lease of it runs out (the database clock decides) and {@code b} takes it over
   * (fence 2) and classifies it before a can go on.
   */
  private TakenOver takenOverBeforeClassifying(
      Instance a, Instance b, java.util.function.LongConsumer beforeTakeOver) throws Exception {
    try (Connection blocker = Db.database().connect()) {
      blocker.setAutoCommit(false);
      // Classification reads the ownership table; cutting a range does not. Holding it freezes
      // a's claim between its cut (committed) and its classification.
      try (Statement st = blocker.createStatement()) {
        st.execute("LOCK TABLE rollcall.ownership IN ACCESS EXCLUSIVE MODE");
      }
      CompletableFuture<Api.Reply> late = CompletableFuture.supplyAsync(() -> api.claim(a, 100));
      long range = awaitScanningRange(a);
      assertFalse(late.isDone(), "a's claim is frozen between cut and classification");
      beforeTakeOver.accept(range);
      TimeTravel.batchLeaseExpired(range);
      CompletableFuture<Api.Reply> next = CompletableFuture.supplyAsync(() -> api.claim(b, 100));
      awaitFence(range, 2);
      blocker.rollback();
      Batch taken = Api.batch(next.get(60, TimeUnit.SECONDS).expect(200).body().get("batch"));
      assertEquals(range, taken.id(), "b classified a's range");
      return new TakenOver(range, late, taken);
    }
  }

  /** The runs handed out in the deploy's pass: the one batch's. */
  private static long lateTaken(String deploy) {
    return Db.number(
        "SELECT run_count FROM rollcall.batches b JOIN rollcall.epochs e ON e.id = b.epoch_id"
            + " WHERE e.deployment_id = ?",
        deploy);
  }

  private static long range(String deploy) {
    return Db.number(
        "SELECT b.id FROM rollcall.batches b JOIN rollcall.epochs e ON e.id = b.epoch_id"
            + " WHERE e.deployment_id = ?",
        deploy);
  }

  private static void awaitFence(long batchId, int fence) {
    Poll.until(
        "batch " + batchId + " reaches fence " + fence,
        Duration.ofSeconds(30),
        () -> Db.number("SELECT fence FROM rollcall.batches WHERE id = ?", batchId) == fence);
  }

  private static long awaitScanningRange(Instance claimer) {
    return Poll.value(
        "a scanning range is cut for " + claimer.id(),
        Duration.ofSeconds(30),
        () ->
            Db.column(
                    "SELECT id::text FROM rollcall.batches WHERE claimer_id = ?"
                        + " AND state = 'scanning'",
                    claimer.id())
                .stream()
                .findFirst()
                .map(Long::parseLong));
  }
}
