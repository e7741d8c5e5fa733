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
import io.micrometer.core.instrument.MeterRegistry;
import jakarta.inject.Inject;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Claims of one service replica queued in memory for the lock of a pass that closes meanwhile learn
 * it from the first of them that takes the lock after the close, not each by taking the lock in
 * turn: at the end of a pass, a fleet's waiting claims answer "done" together.
 */
@ServiceTest
class ClosedEpochLaneTest extends ApiTestBase {

  @Inject MeterRegistry meters;
  @Inject ClaimService claims;

  @Test
  void claimsQueuedForAClosedPassesLockLearnItFromTheFirstThatTakesIt() throws Exception {
    String deploy = UUID.randomUUID().toString();
    Batch last = Passes.onePage(api, deploy);
    // Claims take the epoch's lock to re-check a due deferred run (with only the leased batch
    // outstanding they would answer "wait" without the lock).
    Passes.deferDueRun(last.epochId());
    List<Instance> queued =
        List.of(
            api.register(SourceTables.SMALL, deploy, "a"),
            api.register(SourceTables.SMALL, deploy, "b"),
            api.register(SourceTables.SMALL, deploy, "c"));
    double skipped = locks("skipped");

    List<CompletableFuture<Api.Reply>> answers;
    try (Connection closer = Db.holdingEpochLock(last.epochId())) {
      // The first claim waits on the database for the lock; the other two queue behind it in
      // memory (the epoch's lane), not on the database.
      CompletableFuture<Api.Reply> first =
          CompletableFuture.supplyAsync(() -> api.claim(queued.get(0), 10));
      Poll.until(
          "the first claim waits for the epoch's lock",
          Duration.ofSeconds(10),
          () -> Db.waitingForEpochLock() == 1);
      answers =
          List.of(
              first,
              CompletableFuture.supplyAsync(() -> api.claim(queued.get(1), 10)),
              CompletableFuture.supplyAsync(() -> api.claim(queued.get(2), 10)));
      Poll.until(
          "two claims queue behind it",
          Duration.ofSeconds(10),
          () -> claims.queuedForLock(SourceTables.SMALL, last.epochId()) == 2);
      // A superseding close (Epochs.close) commits while they wait.
      try (PreparedStatement abandon =
              closer.prepareStatement(
                  "UPDATE rollcall.batches SET state = 'abandoned', completed_at = now()"
                      + " WHERE epoch_id = ? AND state IN ('ready', 'leased')");
          PreparedStatement close =
              closer.prepareStatement(
                  "UPDATE rollcall.epochs SET state = 'closed', close_reason = 'superseded',"
                      + " closed_at = now() WHERE id = ?")) {
        abandon.setLong(1, last.epochId());
        abandon.executeUpdate();
        try (PreparedStatement forget =
            closer.prepareStatement("DELETE FROM rollcall.deferred WHERE epoch_id = ?")) {
          forget.setLong(1, last.epochId());
          forget.executeUpdate();
        }
        close.setLong(1, last.epochId());
        assertEquals(1, close.executeUpdate());
      }
      closer.commit();
    }
    for (CompletableFuture<Api.Reply> answer : answers) {
      assertEquals("done", answer.get(30, TimeUnit.SECONDS).expect(200).text("status"));
    }
    // Had each taken the lock in turn to read that the pass closed, the counter would not move:
    // every one of them would count as "queued".
    assertEquals(
        skipped + 2,
        locks("skipped"),
        "the two queued behind the first did not take the lock of the epoch it found closed");
  }

  private double locks(String how) {
    return Passes.epochLocks(meters, SourceTables.SMALL, how);
  }
}
