package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Batch;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.Poll;
import dev.rollcall.testing.SourceTables;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import java.sql.Connection;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/** Passes in the states the recovery tests start from. */
final class Passes {

  private Passes() {}

  /**
   * A deploy's pass of the small namespace, claimed by a new instance named {@code holder}: one
   * page covers the namespace, so the scan is done and the page's batch is leased and outstanding.
   */
  static Batch onePage(Api api, String deploy) {
    Instance holder = api.register(SourceTables.SMALL, deploy, "holder");
    Batch last = api.claimBatch(holder, 5000);
    assertEquals(
        1,
        Db.number(
            "SELECT count(*) FROM rollcall.epochs WHERE id = ? AND scan_done AND state = 'open'",
            last.epochId()),
        "one page covers the namespace: the scan is done and its batch is leased");
    return last;
  }

  /**
   * What the boot pass of {@code deployment} recorded for {@code runId}, in order: each row as
   * {@code outcome:reason}.
   */
  static List<String> ledger(String deployment, String runId) {
    return Db.column(
        "SELECT l.outcome || ':' || l.reason FROM rollcall.ledger l"
            + " JOIN rollcall.epochs e ON e.id = l.epoch_id"
            + " WHERE e.kind = 'boot' AND e.deployment_id = ? AND l.run_id = ? ORDER BY l.id",
        deployment,
        runId);
  }

  /**
   * The batch's complete commits, and its connection is lost while it waits for the epoch's lock
   * (to check whether the pass is over, or to close it): the pass is left open for a later claim or
   * a retried complete to close. Returns the complete's answer, an error.
   */
  static Api.Reply completeLosingItsClose(Api api, Instance holder, Batch batch) throws Exception {
    try (Connection held = Db.holdingEpochLock(batch.epochId())) {
      CompletableFuture<Api.Reply> complete =
          CompletableFuture.supplyAsync(() -> api.complete(holder, batch, List.of()));
      Poll.until(
          "the complete waits for the epoch's lock",
          Duration.ofSeconds(10),
          () -> Db.waitingForEpochLock() == 1);
      assertEquals(1, Db.terminateEpochLockWaiters());
      Api.Reply reply = complete.get(30, TimeUnit.SECONDS);
      held.rollback();
      return reply;
    }
  }

  /**
   * Adds to the pass a run deferred because a live instance owned it: due at every look, so claims
   * take the epoch's lock to re-check it.
   */
  static void deferDueRun(long epochId) {
    Db.update(
        "INSERT INTO rollcall.deferred (epoch_id, run_id, reason)"
            + " VALUES (?, ?, 'owned-by-live-instance')",
        epochId,
        "deferred-" + UUID.randomUUID());
  }

  /** Asserts that the epoch is closed because its pass completed. */
  static void assertClosedAsCompleted(long epochId, String message) {
    assertEquals(
        1,
        Db.number(
            "SELECT count(*) FROM rollcall.epochs WHERE id = ? AND state = 'closed'"
                + " AND close_reason = 'completed'",
            epochId),
        message);
  }

  /** Epoch locks claims of the namespace took (or skipped) {@code how}, so far. */
  static double epochLocks(MeterRegistry meters, String namespace, String how) {
    return meters
        .find("rollcall.epoch.locks")
        .tag("namespace", namespace)
        .tag("how", how)
        .counters()
        .stream()
        .mapToDouble(Counter::count)
        .sum();
  }
}
