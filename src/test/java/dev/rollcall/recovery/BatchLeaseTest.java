package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
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
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

@ServiceTest
class BatchLeaseTest extends ApiTestBase {

  String deploy;

  @BeforeEach
  void setUp() {
    deploy = UUID.randomUUID().toString();
  }

  @Test
  void theHolderCompletingUnderAnotherFenceIsRefusedAsStaleAndAStrangerAsForbidden() {
    Instance a = api.register(SourceTables.SMALL, deploy, "a");
    Instance stranger = api.register(SourceTables.SMALL, deploy, "stranger");
    Batch batch = api.claimBatch(a, 10);

    // No ledger row names the holder yet (its hand-outs are written at their outcome).
    Api.Reply wrongFence = api.complete(a, batch.id(), batch.fence() + 1, List.of()).expect(409);
    assertEquals("urn:rollcall:problem:stale-fence", wrongFence.text("type"));
    api.complete(stranger, batch.id(), batch.fence(), List.of()).expect(403);
    assertEquals(
        0, Db.number("SELECT count(*) FROM rollcall.ledger WHERE batch_id = ?", batch.id()));
    api.complete(a, batch, List.of()).expect(200);
  }

  @Test
  void anExpiredBatchGoesToAnotherClaimerWithANewFenceAndTheLateCompleteIsRefused() {
    Instance a = api.register(SourceTables.SMALL, deploy, "a");
    Instance b = api.register(SourceTables.SMALL, deploy, "b");
    Batch first = api.claimBatch(a, 10);
    TimeTravel.batchLeaseExpired(first.id());

    Batch again = api.claimBatch(b, 10);

    assertEquals(first.id(), again.id());
    assertEquals(first.fence() + 1, again.fence());
    assertEquals(first.runIds(), again.runIds());
    Api.Reply late = api.complete(a, first, List.of()).expect(409);
    assertEquals("application/problem+json", late.contentType());
    assertEquals("urn:rollcall:problem:stale-fence", late.text("type"));
    api.complete(b, again, List.of()).expect(200);
    assertEquals(
        Set.of("lease-expired"),
        Db.set(
            "SELECT outcome FROM rollcall.ledger WHERE batch_id = ? AND fence = ?",
            first.id(),
            first.fence()));
    assertEquals(
        Set.of("enqueued"),
        Db.set(
            "SELECT outcome FROM rollcall.ledger WHERE batch_id = ? AND fence = ?",
            again.id(),
            again.fence()));
  }

  @Test
  void aLiveLeaseIsNotHandedToAnotherClaimer() {
    Instance a = api.register(SourceTables.SMALL, deploy, "a");
    Instance b = api.register(SourceTables.SMALL, deploy, "b");
    Batch first = api.claimBatch(a, 100);
    assertEquals(Db.activeRuns(SourceTables.SMALL).size(), first.runIds().size());

    Api.Reply r = api.claim(b, 100).expect(200);

    assertEquals("wait", r.text("status"));
    long retry = r.body().get("retryAfterMs").asLong();
    assertTrue(retry >= 250 && retry <= 1000, "retryAfterMs " + retry);
  }

  @Test
  void aCompleteFromAnInstanceThatNeverHeldTheBatchIsForbidden() {
    Instance a = api.register(SourceTables.SMALL, deploy, "a");
    Instance stranger = api.register(SourceTables.SMALL, deploy, "stranger");
    Batch batch = api.claimBatch(a, 10);

    Api.Reply r = api.complete(stranger, batch, List.of()).expect(403);

    assertEquals("urn:rollcall:problem:forbidden", r.text("type"));
    assertEquals(
        "leased", Db.column("SELECT state FROM rollcall.batches WHERE id = ?", batch.id()).get(0));
  }

  @Test
  void aBatchOfAnotherNamespaceIsNotFound() {
    Instance a = api.register(SourceTables.SMALL, deploy, "a");
    Instance other = api.register(SourceTables.GROWING, deploy, "other");
    Batch batch = api.claimBatch(a, 10);

    api.complete(other, batch, List.of()).expect(404);
  }

  @Test
  void completingTwiceWithTheSameFenceIsHarmless() {
    Instance a = api.register(SourceTables.SMALL, deploy, "a");
    Batch batch = api.claimBatch(a, 10);
    api.complete(a, batch, List.of()).expect(200);

    Api.Reply again = api.complete(a, batch, List.of()).expect(200);

    assertTrue(again.body().get("alreadyCompleted").asBoolean());
  }

  @Test
  void failedRunsAreRecordedAndHandedOutAgainInTheSameEpoch() {
    Instance a = api.register(SourceTables.SMALL, deploy, "a");
    Batch batch = api.claimBatch(a, 10);
    List<String> failed = batch.runIds().subList(0, 3);

    Api.Reply done = api.complete(a, batch, failed).expect(200);

    assertEquals(3, done.body().get("failed").asInt());
    assertEquals(7, done.body().get("enqueued").asInt());
    assertEquals(
        Set.copyOf(failed),
        Db.set(
            "SELECT run_id FROM rollcall.ledger WHERE batch_id = ? AND outcome = 'failed'",
            batch.id()));
    Set<String> retried = new HashSet<>();
    for (Batch b; (b = api.claimBatch(a, 10)) != null; ) {
      if (b.runIds().stream().anyMatch(failed::contains)) {
        assertEquals(
            Set.copyOf(failed), Set.copyOf(b.runIds()), "a retry batch holds the failed runs");
        retried.addAll(b.runIds());
      }
      api.complete(a, b, List.of()).expect(200);
    }
    assertEquals(Set.copyOf(failed), retried);
  }

  @Test
  void aRunThatKeepsFailingIsGivenUpAfterTheMaximumAttemptsAndTheEpochStillCloses() {
    Instance a = api.register(SourceTables.SMALL, deploy, "a");
    Batch batch = api.claimBatch(a, 10);
    String poison = batch.runIds().get(0);
    api.complete(a, batch, List.of(poison)).expect(200);
    int handOuts = 1;
    for (Batch b; (b = api.claimBatch(a, 10)) != null; ) {
      if (b.runIds().contains(poison)) {
        handOuts++;
        api.complete(a, b, List.of(poison)).expect(200);
      } else {
        api.complete(a, b, List.of()).expect(200);
      }
    }
    assertEquals(5, handOuts, "rollcall.batch.max-attempts");
    assertEquals(
        "closed",
        Db.column("SELECT state FROM rollcall.epochs WHERE id = ?", batch.epochId()).get(0));
  }

  @Test
  void unknownFailedRunIdsAreRefusedAndChangeNothing() {
    Instance a = api.register(SourceTables.SMALL, deploy, "a");
    Batch batch = api.claimBatch(a, 10);

    Api.Reply r = api.complete(a, batch, List.of("wrun_not_in_this_batch")).expect(400);

    assertEquals("urn:rollcall:problem:invalid-request", r.text("type"));
    assertEquals(
        "leased", Db.column("SELECT state FROM rollcall.batches WHERE id = ?", batch.id()).get(0));
    assertEquals(
        0, Db.number("SELECT count(*) FROM rollcall.ledger WHERE batch_id = ?", batch.id()));
    assertEquals(
        batch.runIds().size(),
        Db.number(
            "SELECT count(*) FROM rollcall.hand_outs_in_flight WHERE batch_id = ?", batch.id()));
  }

  @Test
  void aLeavingInstancesBatchesAreReleasedAtOnce() {
    Instance a = api.register(SourceTables.SMALL, deploy, "a");
    Instance b = api.register(SourceTables.SMALL, deploy, "b");
    Batch held = api.claimBatch(a, 10);

    api.leave(a).expect(204);
    Api.Reply r = api.claim(b, 10).expect(200);

    assertEquals("batch", r.text("status"));
    Batch taken = Api.batch(r.body().get("batch"));
    assertEquals(held.id(), taken.id());
    assertEquals(held.fence() + 1, taken.fence());
  }

  @Test
  void aNewDeploySupersedesTheOpenBootEpochOfThePreviousOne() {
    Instance old = api.register(SourceTables.SMALL, deploy, "old");
    Batch oldBatch = api.claimBatch(old, 5);
    Instance fresh = api.register(SourceTables.SMALL, UUID.randomUUID().toString(), "fresh");

    Batch freshBatch = api.claimBatch(fresh, 5);

    assertNotNull(freshBatch);
    // The close follows the new pass's creation, without holding up the claim that created it.
    Poll.until(
        "the old deploy's pass is closed as superseded",
        Duration.ofSeconds(10),
        () ->
            "superseded"
                .equals(
                    Db.column(
                            "SELECT close_reason FROM rollcall.epochs WHERE id = ?",
                            oldBatch.epochId())
                        .get(0)));
    assertNull(api.claimBatch(old, 5), "the old deploy's instances are done");
    api.complete(old, oldBatch, List.of()).expect(200);
  }
}
