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
import jakarta.inject.Inject;
import java.sql.Connection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The claim gate (rollcall.claim.max-concurrent, 8) counts transactions that hold a pooled
 * connection: claims waiting in memory for an epoch's lock hold no permit, so a complete does not
 * queue behind them.
 */
@ServiceTest
class GatedClaimsTest extends ApiTestBase {

  @Inject ClaimService claimService;

  @Test
  void aCompleteDoesNotWaitBehindClaimsQueuedForAnEpochsLock() throws Exception {
    String deploy = UUID.randomUUID().toString();
    Instance holder = api.register(SourceTables.LARGE, deploy, "holder");
    Batch batch = api.claimBatch(holder, 10);
    List<Instance> claimers = new ArrayList<>();
    for (int k = 0; k < 12; k++) {
      claimers.add(api.register(SourceTables.LARGE, deploy, "claimer-" + k));
    }
    ExecutorService senders = Executors.newFixedThreadPool(12);
    List<CompletableFuture<Api.Reply>> claims = new ArrayList<>();
    try (Connection lock = Db.holdingEpochLock(batch.epochId())) {
      // Twelve claims for the same epoch: one waits for its lock in the database, eleven in memory.
      for (Instance c : claimers) {
        claims.add(CompletableFuture.supplyAsync(() -> api.claim(c, 10), senders));
      }
      Poll.until(
          "a claim waits for the epoch's lock in the database",
          Duration.ofSeconds(10),
          () ->
              Db.number(
                      "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                          + " AND query LIKE '%FOR NO KEY UPDATE%'")
                  == 1);
      Poll.until(
          "the other eleven claims wait in memory for the epoch's lane",
          Duration.ofSeconds(20),
          () ->
              claimService.queuedForLock(SourceTables.LARGE, batch.epochId())
                  == claimers.size() - 1);
      Api.Reply done =
          CompletableFuture.supplyAsync(() -> api.complete(holder, batch, List.of()))
              .get(10, TimeUnit.SECONDS);
      assertEquals(200, done.status(), "completed while the claims wait");
      lock.rollback();
      for (CompletableFuture<Api.Reply> c : claims) {
        c.get(30, TimeUnit.SECONDS).expect(200);
      }
    } finally {
      senders.shutdownNow();
    }
  }
}
