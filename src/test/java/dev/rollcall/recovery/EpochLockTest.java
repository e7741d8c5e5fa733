package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

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
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * How a claim takes an epoch's lock: in its first transaction when the lock is free (one
 * transaction fewer for a lone claimer), else by queueing for it after that transaction, never by
 * waiting for it inside the first one.
 */
@ServiceTest
class EpochLockTest extends ApiTestBase {

  @Inject MeterRegistry meters;

  @Test
  void aLoneClaimCutsItsPageInItsFirstTransaction() {
    Instance lone = api.register(SourceTables.LARGE, UUID.randomUUID().toString(), "lone");
    double atOnce = locks("at-once");
    double queued = locks("queued");

    Batch batch = api.claimBatch(lone, 10);

    assertTrue(!batch.runIds().isEmpty());
    assertTrue(locks("at-once") > atOnce, "the page was cut in the claim's first transaction");
    assertEquals(queued, locks("queued"), "no claim queued for the lock");
  }

  @Test
  void aClaimFindingTheLockHeldQueuesForItOutsideItsFirstTransaction() throws Exception {
    String deploy = UUID.randomUUID().toString();
    Instance first = api.register(SourceTables.LARGE, deploy, "first");
    Batch batch = api.claimBatch(first, 10);
    Instance second = api.register(SourceTables.LARGE, deploy, "second");
    double atOnce = locks("at-once");
    double queued = locks("queued");
    CompletableFuture<Api.Reply> claim;
    try (Connection lock = Db.holdingEpochLock(batch.epochId())) {
      claim = CompletableFuture.supplyAsync(() -> api.claim(second, 10));
      // The first transaction skipped the held lock and committed; the claim now waits for the
      // lock in a transaction of its own (the plain FOR NO KEY UPDATE, not SKIP LOCKED).
      Poll.until(
          "the claim waits for the epoch's lock",
          Duration.ofSeconds(10),
          () -> Db.waitingForEpochLock() == 1);
      assertEquals(atOnce, locks("at-once"), "the held lock was not taken at once");
      lock.rollback();
    }
    Api.Reply reply = claim.get(30, TimeUnit.SECONDS);
    reply.expect(200);
    assertEquals(queued + 1, locks("queued"), "taken after queueing for it");
  }

  private double locks(String how) {
    return Passes.epochLocks(meters, SourceTables.LARGE, how);
  }
}
