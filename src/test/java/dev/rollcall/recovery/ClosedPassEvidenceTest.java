package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.testing.Api.Batch;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.EngineRuns;
import dev.rollcall.testing.EngineVersion;
import dev.rollcall.testing.Poll;
import dev.rollcall.testing.RollcallTestResource;
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
 * A boot pass decodes the engine's queued workflow jobs once, when it opens, and that evidence is
 * deleted once the pass has closed, by the complete or the claim that closed it, after the close
 * committed and without holding up that complete's or claim's answer.
 */
@ServiceTest
class ClosedPassEvidenceTest extends ApiTestBase {

  @Test
  void aClosedPassLeavesNoQueueEvidence() {
    Instance i = api.register(SourceTables.ENGINE, UUID.randomUUID().toString(), "closer");
    Batch first = firstBatchWithEvidence(i);
    long epoch = first.epochId();

    // The engine's tables are shared with other tests: a run of theirs may be deferred, and the
    // pass then closes at a later claim rather than at this complete. Either closer forgets.
    api.complete(i, first, List.of()).expect(200);
    api.drain(i, 5000);

    assertEquals("closed:completed", stateOf(epoch));
    Poll.until(
        "the closed pass's queue evidence is deleted",
        Duration.ofSeconds(10),
        () ->
            Db.number("SELECT count(*) FROM rollcall.epoch_wake_jobs WHERE epoch_id = ?", epoch)
                == 0);
  }

  @Test
  void aClaimThatClosesAPassAnswersBeforeItsEvidenceIsDeleted() throws Exception {
    Instance i = api.register(SourceTables.ENGINE, UUID.randomUUID().toString(), "claim-closer");
    Batch first = firstBatchWithEvidence(i);
    long epoch = first.epochId();
    long evidence =
        Db.number("SELECT count(*) FROM rollcall.epoch_wake_jobs WHERE epoch_id = ?", epoch);
    // The batch's complete commits and its check whether the pass is over is lost: a later claim
    // closes the pass.
    Passes.completeLosingItsClose(api, i, first);

    // Another session holds the evidence's rows: a close that deleted them in its own
    // transaction would wait for it, and so would the answer of the claim that closed the pass.
    try (Connection holding = Db.database().connect()) {
      holding.setAutoCommit(false);
      try (PreparedStatement st =
          holding.prepareStatement(
              "SELECT 1 FROM rollcall.epoch_wake_jobs WHERE epoch_id = ? FOR UPDATE")) {
        st.setLong(1, epoch);
        st.executeQuery().close();
      }
      CompletableFuture.supplyAsync(() -> api.drain(i, 5000)).get(60, TimeUnit.SECONDS);
      assertEquals("closed:completed", stateOf(epoch));
      assertEquals(
          evidence,
          Db.number("SELECT count(*) FROM rollcall.epoch_wake_jobs WHERE epoch_id = ?", epoch),
          "the evidence is still there: its delete waits, the close did not");
      holding.rollback();
    }
    Poll.until(
        "the closed pass's queue evidence is deleted once its rows are free",
        Duration.ofSeconds(10),
        () ->
            Db.number("SELECT count(*) FROM rollcall.epoch_wake_jobs WHERE epoch_id = ?", epoch)
                == 0);
  }

  /** A parked run with its wake-up job and a pending run; the pass's first batch, evidence read. */
  private Batch firstBatchWithEvidence(Instance i) {
    EngineRuns runs = EngineRuns.on(RollcallTestResource.database(), EngineVersion.STABLE);
    runs.futureWaitWithJob();
    runs.pending();
    Batch first = api.claimBatch(i, 5000);
    assertTrue(
        Db.number(
                "SELECT count(*) FROM rollcall.epoch_wake_jobs WHERE epoch_id = ?", first.epochId())
            > 0,
        "the pass decoded the queued wake-up job");
    return first;
  }

  private static String stateOf(long epoch) {
    return Db.column(
            "SELECT state || ':' || coalesce(close_reason, '') FROM rollcall.epochs WHERE id = ?",
            epoch)
        .get(0);
  }
}
