package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.EngineRuns;
import dev.rollcall.testing.EngineVersion;
import dev.rollcall.testing.RollcallTestResource;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import dev.rollcall.testing.TimeTravel;
import jakarta.inject.Inject;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Instances that die together (app replicas that exit with their database) are declared dead one
 * transaction each. A run one of them was executing, whose job another's worker held, is woken by
 * that job once its lock is released: the first takeover must not re-drive it beside that job.
 */
@ServiceTest
class DyingTogetherTest extends ApiTestBase {

  @Inject Reaper reaper;

  EngineRuns runs;
  String deploy;

  @BeforeEach
  void fresh() {
    runs = EngineRuns.on(RollcallTestResource.database(), EngineVersion.BETA);
    deploy = UUID.randomUUID().toString();
  }

  @Test
  void aRunWhoseJobAnotherDyingInstanceHoldsIsLeftToThatJob() {
    String holderWorker = "worker-h-" + deploy;
    String run = runs.midStepLockedBy(holderWorker);
    // Both reported the run; the holder's worker holds its job. The other's lease ran out first,
    // so its takeover opens first, while the holder is not declared dead yet.
    Instance holder = api.register(SourceTables.ENGINE, deploy, "holder", List.of(holderWorker));
    Instance other = api.register(SourceTables.ENGINE, deploy, "other", List.of("w-" + deploy));
    api.heartbeat(holder, List.of(run)).expect(200);
    api.heartbeat(other, List.of(run)).expect(200);
    // Locked longer ago than the activity fence: as when the database restarted under them.
    Db.update(
        "UPDATE graphile_worker._private_jobs SET locked_at = now() - interval '1 hour'"
            + " WHERE locked_by = ?",
        holderWorker);
    TimeTravel.leaseExpired(other, Duration.ofSeconds(2));
    TimeTravel.leaseExpired(holder, Duration.ofSeconds(1));

    reaper.runOnce().await().indefinitely();

    assertEquals(
        0,
        Db.number(
            "SELECT count(*) FROM rollcall.batch_runs r JOIN rollcall.batches b"
                + " ON b.id = r.batch_id JOIN rollcall.epochs e ON e.id = b.epoch_id"
                + " WHERE r.run_id = ? AND e.subject_instance_id IN (?, ?)",
            run,
            holder.id(),
            other.id()),
        "re-driven beside the job the holder's takeover released");
    // The job the holder's worker held is queued again, unlocked, for the queue to deliver.
    assertEquals(
        List.of("unlocked"),
        Db.column(
            "SELECT CASE WHEN locked_by IS NULL THEN 'unlocked' ELSE locked_by END"
                + " FROM graphile_worker._private_jobs WHERE rollcall.engine_run_id(payload) = ?",
            run));
  }
}
