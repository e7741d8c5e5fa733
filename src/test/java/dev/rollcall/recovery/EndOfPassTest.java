package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Batch;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.Poll;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import java.sql.Connection;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * At the end of a pass, while its last batches are leased and no deferred run is due, a claim
 * answers "wait" without the epoch's lock; when there is more to do (a deferred run to re-check, a
 * pass to close) it still takes the lock.
 */
@ServiceTest
class EndOfPassTest extends ApiTestBase {

  @Test
  void aClaimWaitingForTheLastBatchAnswersWithoutTheEpochsLock() throws Exception {
    String deploy = UUID.randomUUID().toString();
    Batch last = Passes.onePage(api, deploy);
    Instance waiting = api.register(SourceTables.SMALL, deploy, "waiting");
    try (Connection held = Db.holdingEpochLock(last.epochId())) {
      // Had the claim queued for the lock to learn it must wait, it would not answer while held.
      Api.Reply reply =
          CompletableFuture.supplyAsync(() -> api.claim(waiting, 10)).get(10, TimeUnit.SECONDS);
      assertEquals("wait", reply.expect(200).text("status"));
      assertEquals(0, Db.waitingForEpochLock(), "no session waited for the lock");
      held.rollback();
    }
  }

  @Test
  void aLeaseThatExpiredAtTheEndOfAPassIsLetAgainNotWaitedFor() {
    String deploy = UUID.randomUUID().toString();
    Batch last = Passes.onePage(api, deploy);
    // Its holder died or stalled: the last batch's lease ran out.
    Db.update(
        "UPDATE rollcall.batches SET lease_expires_at = now() - interval '1 second' WHERE id = ?",
        last.id());
    Instance next = api.register(SourceTables.SMALL, deploy, "next");
    Api.Reply reply = api.claim(next, 5000).expect(200);
    assertEquals("batch", reply.text("status"), "the expired batch is let again, not waited for");
    assertEquals(last.id(), Api.batch(reply.body().get("batch")).id());
  }

  @Test
  void aDeferredRunDueIsReCheckedUnderTheLock() throws Exception {
    String deploy = UUID.randomUUID().toString();
    Batch last = Passes.onePage(api, deploy);
    Passes.deferDueRun(last.epochId());
    Instance rechecking = api.register(SourceTables.SMALL, deploy, "rechecking");
    CompletableFuture<Api.Reply> claim;
    try (Connection held = Db.holdingEpochLock(last.epochId())) {
      claim = CompletableFuture.supplyAsync(() -> api.claim(rechecking, 10));
      Poll.until(
          "the claim waits for the lock to re-check the deferred run",
          Duration.ofSeconds(10),
          () -> Db.waitingForEpochLock() == 1);
      held.rollback();
    }
    claim.get(30, TimeUnit.SECONDS).expect(200);
    assertEquals(
        0,
        Db.number("SELECT count(*) FROM rollcall.deferred WHERE epoch_id = ?", last.epochId()),
        "the claim re-checked the deferred run");
  }

  @Test
  void aPassLeftOpenAfterItsLastBatchIsClosedByTheNextClaim() throws Exception {
    String deploy = UUID.randomUUID().toString();
    Instance holder = api.register(SourceTables.SMALL, deploy, "holder");
    Batch last = api.claimBatch(holder, 5000);
    Passes.completeLosingItsClose(api, holder, last);
    assertEquals(
        1,
        Db.number(
            "SELECT count(*) FROM rollcall.epochs e JOIN rollcall.batches b ON b.epoch_id = e.id"
                + " WHERE b.id = ? AND b.state = 'completed' AND e.state = 'open'",
            last.id()),
        "the batch is completed and its pass still open");
    Instance closing = api.register(SourceTables.SMALL, deploy, "closing");
    assertEquals("done", api.claim(closing, 10).expect(200).text("status"));
    Passes.assertClosedAsCompleted(
        last.epochId(), "the claim took the lock and closed the finished pass");
  }
}
