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
import java.sql.PreparedStatement;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The complete of a pass's last batch and a claim that closes the same epoch as superseded take
 * their locks in one order: no deadlock victim, and the complete still closes the epoch. Completes
 * of one pass check whether it is over beside one another, not one after another.
 */
@ServiceTest
class CompleteLockOrderTest extends ApiTestBase {

  @Test
  void theLastCompleteAndASupersedingCloseDoNotDeadlock() throws Exception {
    Instance holder = api.register(SourceTables.SMALL, UUID.randomUUID().toString(), "holder");
    Batch last = api.claimBatch(holder, 5000);
    assertEquals(
        1,
        Db.number(
            "SELECT count(*) FROM rollcall.epochs WHERE id = ? AND scan_done AND state = 'open'",
            last.epochId()),
        "one page covers the namespace: its batch is the pass's last");

    CompletableFuture<Api.Reply> complete;
    // A claim opening the next deploy's boot epoch closes this one as superseded: the epoch's row
    // first (the lock a cut holds too), then its ready and leased batches (Epochs.close).
    try (Connection closing = Db.holdingEpochLock(last.epochId())) {
      complete = completeWaitingForEpochLock(holder, last);
      // Had the complete kept its batch's row lock while it waited, this statement would wait for
      // the complete, and PostgreSQL would end one of the two as a deadlock victim.
      try (PreparedStatement st =
          closing.prepareStatement(
              "UPDATE rollcall.batches SET state = 'abandoned', completed_at = now()"
                  + " WHERE epoch_id = ? AND state IN ('ready', 'leased')")) {
        st.setLong(1, last.epochId());
        assertEquals(
            0,
            st.executeUpdate(),
            "the batch was completed before the close looked (a complete ended as the deadlock"
                + " victim leaves it leased)");
      }
      closing.rollback();
    }
    complete.get(30, TimeUnit.SECONDS).expect(200);
    Passes.assertClosedAsCompleted(
        last.epochId(), "the complete closed the finished epoch once the lock was free");
  }

  @Test
  void aCloseLostAfterItsCompleteCommittedIsDoneByTheRetriedComplete() throws Exception {
    Instance holder = api.register(SourceTables.SMALL, UUID.randomUUID().toString(), "retrier");
    Batch last = api.claimBatch(holder, 5000);

    // Its connection was terminated: the database was lost under it, a retryable 503.
    Api.Reply lost = Passes.completeLosingItsClose(api, holder, last).expect(503);
    assertEquals("urn:rollcall:problem:database-unavailable", lost.text("type"));
    assertEquals(
        1,
        Db.number(
            "SELECT count(*) FROM rollcall.epochs e JOIN rollcall.batches b ON b.epoch_id = e.id"
                + " WHERE b.id = ? AND b.state = 'completed' AND e.state = 'open'",
            last.id()),
        "the batch is completed and its epoch still open");

    Api.Reply retried = api.complete(holder, last, List.of());
    retried.expect(200);
    Passes.assertClosedAsCompleted(
        last.epochId(), "the retried complete closed the finished epoch");
  }

  @Test
  void completesOfOnePassCheckWhetherItIsOverWithoutQueueingBehindOneAnother() throws Exception {
    String deploy = UUID.randomUUID().toString();
    Instance a = api.register(SourceTables.SMALL, deploy, "a");
    Instance b = api.register(SourceTables.SMALL, deploy, "b");
    Batch first = api.claimBatch(a, 10);
    Batch last = api.claimBatch(b, 5000);
    assertEquals(first.epochId(), last.epochId());
    assertEquals(
        1,
        Db.number(
            "SELECT count(*) FROM rollcall.epochs WHERE id = ? AND scan_done AND state = 'open'",
            first.epochId()),
        "two pages cover the namespace: the scan is done with both batches leased");

    // Another complete of the pass is checking whether the pass is over (its share lock of the
    // epoch's row): this one checks beside it, finds the other batch outstanding, and answers.
    try (Connection checking =
        Db.holding("SELECT 1 FROM rollcall.epochs WHERE id = ? FOR SHARE", first.epochId())) {
      CompletableFuture.supplyAsync(() -> api.complete(a, first, List.of()))
          .get(10, TimeUnit.SECONDS)
          .expect(200);
      checking.rollback();
    }
    api.complete(b, last, List.of()).expect(200);
    Passes.assertClosedAsCompleted(first.epochId(), "the last complete closed the pass");
  }

  @Test
  void aCompleteSeesTheLastDeferredRunSettledByAClaimerThatHeldTheEpochLock() throws Exception {
    Instance holder = api.register(SourceTables.SMALL, UUID.randomUUID().toString(), "settled");
    Batch last = api.claimBatch(holder, 5000);
    // A run the pass deferred, still to be re-checked: the pass is not over while it is there.
    Db.update(
        "INSERT INTO rollcall.deferred (epoch_id, run_id, reason) VALUES (?, ?, 'owner-live')",
        last.epochId(),
        "deferred-" + UUID.randomUUID());

    CompletableFuture<Api.Reply> complete;
    // A claimer holds the epoch's lock and settles that run; its own close failed, since the last
    // batch was still leased when it looked.
    try (Connection claimer = Db.holdingEpochLock(last.epochId());
        PreparedStatement settle =
            claimer.prepareStatement("DELETE FROM rollcall.deferred WHERE epoch_id = ?")) {
      settle.setLong(1, last.epochId());
      assertEquals(1, settle.executeUpdate());
      // The complete's check waits for the claimer: read without it, it would find the deferred
      // run still there and leave the pass open, and the claimer would not look again.
      complete = completeWaitingForEpochLock(holder, last);
      claimer.commit();
    }
    complete.get(30, TimeUnit.SECONDS).expect(200);
    Passes.assertClosedAsCompleted(
        last.epochId(), "the complete closed the pass once the claimer's settlement committed");
  }

  /** Sends the batch's complete and returns once its close waits for the held epoch lock. */
  private CompletableFuture<Api.Reply> completeWaitingForEpochLock(Instance holder, Batch batch) {
    CompletableFuture<Api.Reply> complete =
        CompletableFuture.supplyAsync(() -> api.complete(holder, batch, List.of()));
    Poll.until(
        "the complete's close waits for the epoch's lock",
        Duration.ofSeconds(10),
        () -> Db.waitingForEpochLock() == 1);
    return complete;
  }
}
