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
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Test;

/**
 * A boot pass decodes the engine's queued workflow jobs once, when it opens, and that evidence is
 * deleted once the pass has closed: by the complete that closed it, after the close committed and
 * without holding up the complete's answer, or in the transaction of the claim that closed it.
 */
@ServiceTest
class ClosedPassEvidenceTest extends ApiTestBase {

  @Test
  void aClosedPassLeavesNoQueueEvidence() {
    EngineRuns runs = EngineRuns.on(RollcallTestResource.database(), EngineVersion.STABLE);
    runs.futureWaitWithJob();
    runs.pending();
    Instance i = api.register(SourceTables.ENGINE, UUID.randomUUID().toString(), "closer");

    Batch first = api.claimBatch(i, 5000);
    long epoch = first.epochId();
    assertTrue(
        Db.number("SELECT count(*) FROM rollcall.epoch_wake_jobs WHERE epoch_id = ?", epoch) > 0,
        "the pass decoded the queued wake-up job");

    // The engine's tables are shared with other tests: a run of theirs may be deferred, and the
    // pass then closes at a later claim rather than at this complete. Either closer forgets.
    api.complete(i, first, List.of()).expect(200);
    api.drain(i, 5000);

    assertEquals(
        "closed:completed",
        Db.column(
                "SELECT state || ':' || coalesce(close_reason, '') FROM rollcall.epochs"
                    + " WHERE id = ?",
                epoch)
            .get(0));
    Poll.until(
        "the closed pass's queue evidence is deleted",
        Duration.ofSeconds(10),
        () ->
            Db.number("SELECT count(*) FROM rollcall.epoch_wake_jobs WHERE epoch_id = ?", epoch)
                == 0);
  }
}
