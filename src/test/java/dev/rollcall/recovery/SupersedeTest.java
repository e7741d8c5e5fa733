package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.Poll;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import jakarta.inject.Inject;
import java.sql.Connection;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * A new deploy's pass supersedes the open passes of older deploys. Its creation commits on its own
 * and the close follows in the background, so none of the deploy's first claims, its creator's
 * included, waits for the older passes' locks; a close lost between the two is made by the periodic
 * check.
 */
@ServiceTest
class SupersedeTest extends ApiTestBase {

  static final String NS = SourceTables.SMALL;

  @Inject StrandedEpochs periodic;

  @Test
  void noFirstClaimOfADeployWaitsForTheCloseOfAPassItSupersedes() throws Exception {
    Instance old = api.register(NS, "old-" + UUID.randomUUID(), "old-1");
    long oldEpoch = api.claimBatch(old, 1).epochId();
    String deploy = "new-" + UUID.randomUUID();
    Instance creator = api.register(NS, deploy, "new-1");
    Instance peer = api.register(NS, deploy, "new-2");

    CompletableFuture<Api.Reply> created;
    // A cut of the old pass holds its epoch's lock: closing the old pass waits for it.
    try (Connection cut = Db.holdingEpochLock(oldEpoch)) {
      created = CompletableFuture.supplyAsync(() -> api.claim(creator, 1));
      Poll.until(
          "the new deploy's boot epoch is committed while the old pass's lock is held",
          Duration.ofSeconds(10),
          () -> bootEpochs(deploy) == 1);
      Poll.until(
          "the creator's close waits for the old pass's lock",
          Duration.ofSeconds(10),
          () ->
              Db.number(
                      "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                          + " AND query LIKE 'UPDATE rollcall.epochs SET state = ''closed''%'")
                  == 1);

      // Had the creation and the close been one transaction, this claim would wait on the new
      // epoch's unique key for as long as the old pass's lock is held.
      Api.Batch served =
          CompletableFuture.supplyAsync(() -> api.claimBatch(peer, 1)).get(20, TimeUnit.SECONDS);

      assertEquals(bootEpochId(deploy), served.epochId());
      // Nor does the creator's own claim wait for the close it started.
      assertEquals(
          "batch",
          created.get(20, TimeUnit.SECONDS).expect(200).text("status"),
          "the creator's claim is answered while its close of the old pass waits for the lock");
      assertEquals("open:", LongLivedTest.state(oldEpoch), "closing waits for the cut");
      cut.rollback();
    }
    Poll.until(
        "the old pass is closed once its lock is free",
        Duration.ofSeconds(10),
        () -> LongLivedTest.state(oldEpoch).equals("closed:superseded"));
  }

  @Test
  void aSupersedingCloseLostAfterTheNewPassCommittedIsMadeByThePeriodicCheck() {
    Instance old = api.register(NS, "old-" + UUID.randomUUID(), "old-1");
    long oldEpoch = api.claimBatch(old, 1).epochId();
    assertEquals(List.of(), periodic.runOnce().await().indefinitely());

    // A later deploy's pass committed, and its creator died before closing the older pass.
    String next = "next-" + UUID.randomUUID();
    api.register(NS, next, "next-1");
    long nextEpoch =
        Db.number(
            "INSERT INTO rollcall.epochs (namespace, kind, deployment_id, snapshot_max_id,"
                + " snapshot_at) VALUES (?, 'boot', ?, NULL, now()) RETURNING id",
            NS,
            next);
    assertEquals("open:", LongLivedTest.state(oldEpoch));

    List<Long> closed = periodic.runOnce().await().indefinitely();

    assertEquals(List.of(oldEpoch), closed);
    assertEquals("closed:superseded", LongLivedTest.state(oldEpoch));
    assertEquals("open:", LongLivedTest.state(nextEpoch));
  }

  private static long bootEpochs(String deploy) {
    return Db.number(
        "SELECT count(*) FROM rollcall.epochs WHERE kind = 'boot' AND deployment_id = ?", deploy);
  }

  private static long bootEpochId(String deploy) {
    return Db.number(
        "SELECT id FROM rollcall.epochs WHERE kind = 'boot' AND deployment_id = ?", deploy);
  }
}
