package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Batch;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.RollcallTestResource;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Pool;
import jakarta.inject.Inject;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/**
 * Pages of one pass are classified in parallel, and each adds its skips and deferrals to the pass's
 * counts: one classification must not wait for another that has not committed yet, and the counts
 * still add up.
 */
@ServiceTest
class ConcurrentCountsTest extends ApiTestBase {

  @Inject Pool pool;
  @Inject Ledger ledger;

  @Test
  void aClassificationCountsItsSkipsWhileAnotherOfThePassHasNotCommitted() throws Exception {
    Instance i = api.register(SourceTables.SMALL, UUID.randomUUID().toString(), "counter");
    Batch b = api.claimBatch(i, 5000);
    Epoch epoch =
        new Epoch(
            b.epochId(),
            SourceTables.SMALL,
            EpochKind.BOOT,
            true,
            null,
            Optional.empty(),
            false,
            0,
            0,
            Optional.empty());
    long before = skipped(epoch.id());
    long terminalBefore = terminalSkips(epoch.id());

    CompletableFuture<Void> counted = new CompletableFuture<>();
    CompletableFuture<Void> commit = new CompletableFuture<>();
    CompletableFuture<Void> first =
        pool.withTransaction(
                conn ->
                    ledger
                        .record(conn, epoch, skips("first", 3), "skipped", null)
                        .invoke(() -> counted.complete(null))
                        // Still open: a classification that counted and has not committed yet.
                        .chain(() -> Uni.createFrom().completionStage(commit)))
            .subscribeAsCompletionStage();
    counted.get(10, TimeUnit.SECONDS);

    assertDoesNotThrow(
        () ->
            pool.withTransaction(
                    conn ->
                        conn.query("SET LOCAL lock_timeout = '2s'")
                            .execute()
                            .chain(
                                () ->
                                    ledger.record(
                                        conn, epoch, skips("second", 2), "skipped", null)))
                .await()
                .atMost(Duration.ofSeconds(10)),
        "a second classification of the pass counted its skips without waiting for the first to"
            + " commit");
    commit.complete(null);
    first.get(10, TimeUnit.SECONDS);

    assertEquals(before + 5, skipped(epoch.id()), "the pass counts both classifications' skips");
    assertTrue(
        Db.number(
                "SELECT count(*) FROM rollcall.epoch_counts WHERE epoch_id = ? AND outcome ="
                    + " 'skipped'",
                epoch.id())
            >= 2,
        "the two counted into parts of their own");
    assertEquals(
        terminalBefore + 5,
        terminalSkips(epoch.id()),
        "the admin API's breakdown by reason adds the parts up");
  }

  private long terminalSkips(long epochId) {
    Api.Reply view =
        api.send("GET", "admin/epochs/" + epochId, RollcallTestResource.ADMIN_TOKEN, null)
            .expect(200);
    var n = view.body().get("skippedByReason").get(Reason.TERMINAL.wire());
    return n == null ? 0 : n.asLong();
  }

  private static long skipped(long epochId) {
    return Db.number("SELECT skipped FROM rollcall.epoch_progress WHERE id = ?", epochId);
  }

  private static List<Verdict> skips(String prefix, int n) {
    return IntStream.range(0, n)
        .mapToObj(k -> Verdict.skip(prefix + "-" + UUID.randomUUID(), "wf", Reason.TERMINAL))
        .toList();
  }
}
