package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.rollcall.source.EngineEvents;
import dev.rollcall.source.Mend;
import dev.rollcall.source.RunSource;
import dev.rollcall.source.RunSources;
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
import dev.rollcall.testing.TimeTravel;
import io.micrometer.core.instrument.MeterRegistry;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Pool;
import jakarta.inject.Inject;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Runs whose last write the engine tore (a row written, its event not: the process died between the
 * engine's two statements) are mended by the takeover of their dead owner, in its transaction, and
 * by a pass that hands them out; never while a live instance executes them.
 */
@ServiceTest
class TornRunsTest extends ApiTestBase {

  @Inject Reaper reaper;
  @Inject TakeoverRechecks rechecks;
  @Inject MeterRegistry meters;
  @Inject RunSources sources;
  @Inject Pool pool;

  EngineRuns beta;
  EngineRuns stable;
  String deploy;

  @BeforeEach
  void fresh() {
    beta = EngineRuns.on(RollcallTestResource.database(), EngineVersion.BETA);
    stable = EngineRuns.on(RollcallTestResource.database(), EngineVersion.STABLE);
    deploy = UUID.randomUUID().toString();
  }

  @Test
  void aTakeoverWritesTheMissingStepEventsFromTheRowsAndRollsTornWaitsBack() throws Exception {
    // The peer's boot pass first: it would mend the runs itself (see the last test).
    Instance peer = bootedPeer();
    String completed = beta.tornStepCompleted();
    String failed = beta.tornStepFailed();
    String failed4x = stable.tornStepFailed();
    String waitCreated = beta.tornWaitCreated();
    String waitCompleted = beta.tornWaitCompleted();
    List<String> torn = List.of(completed, failed, failed4x, waitCreated, waitCompleted);
    double before = repaired();

    Instance victim = api.register(SourceTables.ENGINE, deploy, "victim");
    api.heartbeat(victim, torn).expect(200);
    TimeTravel.leaseExpired(victim);
    reaper.runOnce().await().indefinitely();

    // Rolled forward: the event the dead process was about to write, from the row, after every
    // event of the run; the step is still completed and its body need not run again.
    byte[] event = eventData(completed, "step_completed");
    Step step = step(completed);
    assertArrayEquals(
        EngineEvents.stepCompleted(step.name(), beta.workflowName(), step.output()), event);
    assertEquals("completed", step.status());
    assertEquals(
        "step_completed",
        Db.column(
                "SELECT type FROM workflow.workflow_events WHERE run_id = ? ORDER BY id DESC"
                    + " LIMIT 1",
                completed)
            .get(0));
    assertArrayEquals(
        EngineEvents.stepFailed(step(failed).name(), step(failed).error()),
        eventData(failed, "step_failed"));
    // The 4.x row keeps a re-shaped error its event cannot be rebuilt from: the step runs again.
    assertEquals("running", step(failed4x).status());
    assertEquals(0, events(failed4x, "step_failed"));
    // Waits are rolled back: the replay writes them again, row and event, as the engine does.
    assertEquals(
        0, Db.number("SELECT count(*) FROM workflow.workflow_waits WHERE run_id = ?", waitCreated));
    assertEquals(
        List.of("waiting"),
        Db.column(
            "SELECT status::text FROM workflow.workflow_waits WHERE run_id = ?", waitCompleted));

    // Each mend is a ledger row under the takeover, naming what it found and what it wrote.
    for (String run : torn) {
      List<String> rows =
          Db.column(
              "SELECT reason || ' ' || detail FROM rollcall.ledger WHERE run_id = ?"
                  + " AND outcome = 'torn-repaired' AND instance_id = ?",
              run,
              victim.id());
      assertEquals(1, rows.size(), run + ": " + rows);
      assertTrue(rows.get(0).startsWith("owner-dead "), rows.get(0));
    }
    assertEquals(5, repaired() - before, 0.0);

    // The mended runs are handed out (or woken by their owner's messages) as before.
    for (Batch b; (b = api.claimBatch(peer, 100)) != null; ) {
      api.complete(peer, b, List.of()).expect(200);
    }
    // Mending again finds nothing: the log explains every row now.
    assertEquals(1, events(completed, "step_completed"));
    api.leave(peer).expect(204);
  }

  @Test
  void aRunALiveInstanceDeliversIsNotMendedByTheTakeoverOfItsOldOwner() throws Exception {
    Instance peer = bootedPeer();
    String peerWorker = "worker-peer-" + deploy;
    // The live peer has taken the runs up: its delivery started the step and is between the row
    // and the event; another of its deliveries replays the run with the torn wait (any delivery of
    // a run may write its waits). Its half-done writes look just the same as tears.
    String step = beta.tornStepCompletedLockedBy(peerWorker);
    String wait = beta.tornWaitCompleted();
    beta.deliveringBy(wait, peerWorker);
    victimDiesWhileThePeerReports(peer, List.of(), List.of(step, wait));

    assertEquals(0, events(step, "step_completed"));
    assertEquals(
        List.of("completed"),
        Db.column("SELECT status::text FROM workflow.workflow_waits WHERE run_id = ?", wait));
    assertEquals(0, mends(step) + mends(wait));
    api.leave(peer).expect(204);
  }

  @Test
  void aRunALiveInstanceReportedButNoLongerDeliversIsMendedByTheTakeover() throws Exception {
    Instance peer = bootedPeer();
    String step = beta.tornStepCompleted();
    String wait = beta.tornWaitCompleted();
    // The peer's report is a heartbeat old: none of the runs' jobs is locked, so no delivery of
    // them is under way (a delivery holds its job locked from before its first write until after
    // its last), and no one is writing them.
    victimDiesWhileThePeerReports(peer, List.of(), List.of(step, wait));

    assertEquals(1, events(step, "step_completed"));
    assertEquals(
        List.of("waiting"),
        Db.column("SELECT status::text FROM workflow.workflow_waits WHERE run_id = ?", wait));
    assertEquals(1, mends(step));
    assertEquals(1, mends(wait));
    api.leave(peer).expect(204);
  }

  @Test
  void theDeadOwnersInlineStepIsMendedInARunWhoseParallelStepsRunOnALivePeer() throws Exception {
    Instance peer = bootedPeer();
    String worker = "worker-" + deploy;
    // A Promise.all: the victim ran one step inline (its job still locked by the victim's worker)
    // and died between the step's two writes; the peer runs a sibling step of the same run.
    String torn = beta.tornStepCompletedLockedBy(worker);
    // And a step a live peer's delivery started inline and is writing: the row, not yet the event.
    String notOurs = beta.tornStepCompletedLockedBy("worker-peer-" + deploy);
    victimDiesWhileThePeerReports(peer, List.of(worker), List.of(torn, notOurs));

    assertEquals(1, events(torn, "step_completed"));
    assertEquals(
        List.of("owner-dead"),
        Db.column(
            "SELECT reason FROM rollcall.ledger WHERE run_id = ? AND outcome = 'torn-repaired'",
            torn));
    // A torn step of a live-owned run that a live message started is left alone: its live process
    // may be writing it.
    assertEquals(0, events(notOurs, "step_completed"));
    // Neither run is re-driven while the live peer reports it: it may be replaying it right now.
    TimeTravel.deferredAnHourAgo(torn);
    assertEquals(List.of(), drain(peer));
    assertEquals(
        List.of("owned-by-live-instance"),
        Db.column("SELECT reason FROM rollcall.deferred WHERE run_id = ?", torn));
    // Once the peer no longer reports it, the re-check finds the dead instance's own message, its
    // lock released, queued: that delivery replays the mended log, so no re-drive is added (the
    // takeover looks again while the job may still run: BackstopTest).
    peerLetsGo(peer, torn);
    assertEquals(List.of(), drain(peer));
    assertEquals(
        List.of("has-queued-job"),
        Db.column("SELECT reason FROM rollcall.deferred WHERE run_id = ?", torn));
    api.leave(peer).expect(204);
  }

  @Test
  void theDeadOwnersStepRunByItsOwnMessageIsMendedAtTheTakeoverWhenNoDeliveryOfItIsUnderWay() {
    Instance peer = bootedPeer();
    String worker = "worker-" + deploy;
    // A Promise.all's step delivered as a message of its own (its start names no inline owner),
    // executed by the victim's worker, torn between the row and the event; a peer runs a sibling.
    String torn = beta.tornStepCompletedByItsMessageLockedBy(worker);
    victimDiesWhileThePeerReports(peer, List.of(worker), List.of(torn));

    // No job that runs the step is locked once the victim's are released: no live delivery started
    // it, so the takeover rolls it forward at once instead of after the re-check and its fence.
    assertEquals(1, events(torn, "step_completed"));
    assertEquals(1, mends(torn));
    api.leave(peer).expect(204);
  }

  @Test
  void aFourXStepTornByItsDeadJobIsMendedAtTheTakeoverBesideALivePeer() {
    Instance peer = bootedPeer();
    String worker = "worker-" + deploy;
    // The 4.x line runs every step by a job of the step task; no start names an owner.
    String torn = stable.tornStepCompletedByItsMessageLockedBy(worker);
    victimDiesWhileThePeerReports(peer, List.of(worker), List.of(torn));

    assertEquals(1, events(torn, "step_completed"));
    assertEquals(1, mends(torn));
    api.leave(peer).expect(204);
  }

  @Test
  void aFourXStepAPeersJobHoldsAgainIsNotMendedBesideIt() {
    Instance peer = bootedPeer();
    String torn =
        stable.tornStepCompletedByItsMessageWhileAPeerHoldsItAgain(
            "worker-" + deploy, "worker-peer-" + deploy);
    victimDiesWhileThePeerReports(peer, List.of("worker-" + deploy), List.of(torn));

    assertEquals(0, events(torn, "step_completed"), "the peer's delivery may be writing it");
    assertEquals(0, mends(torn));
    api.leave(peer).expect(204);
  }

  @Test
  void theDeadOwnersStepALivePeerHoldsAgainIsMendedOnceNoLivePeerReportsTheRunAndItIsQuiet()
      throws Exception {
    Instance peer = bootedPeer();
    String worker = "worker-" + deploy;
    // A Promise.all's step delivered as a message of its own (its start names no inline owner),
    // executed by the victim's worker, torn between the row and the event; the runtime queued the
    // step again meanwhile, and a peer's worker holds that job.
    String torn =
        beta.tornStepCompletedByItsMessageWhileAPeerHoldsItAgain(worker, "worker-peer-" + deploy);
    victimDiesWhileThePeerReports(peer, List.of(worker), List.of(torn));

    // The row may be the peer's delivery's write half-way through: no event says whose it is.
    assertEquals(0, events(torn, "step_completed"), "not mended beside a live delivery");
    TimeTravel.deferredAnHourAgo(torn);
    assertEquals(List.of(), drain(peer), "not while the live peer reports it");
    // No job of the run can wake it soon (its message ran out of attempts; only the engine's
    // backstop is left, due at the end of the 860 s inline-ownership lease): the wake-up the dead
    // process owed the run after the step's event is sent by the re-drive, once the peer lets go.
    BackstopTest.ownerGoneBackstopArmed(torn, "none");
    Db.update(
        "UPDATE graphile_worker._private_jobs SET attempts = max_attempts, locked_by = NULL"
            + " WHERE rollcall.engine_job_run_id(payload) = ? AND key IS DISTINCT FROM ?",
        torn,
        "step_" + torn + ":backstop:1");
    peerLetsGo(peer, torn);
    // The engine wrote to the run within the activity fence: held back, not woken into a replay
    // that cannot go on.
    assertEquals(List.of(), drain(peer), "not while the run is not quiet");
    assertEquals(0, events(torn, "step_completed"));
    assertEquals(
        List.of("recently-active"),
        Db.column("SELECT reason FROM rollcall.deferred WHERE run_id = ?", torn));
    TimeTravel.engineQuiet(torn);
    TimeTravel.deferredAnHourAgo(torn);
    Batch taken = api.claimBatch(peer, 100);
    assertTrue(taken != null && taken.runIds().contains(torn), "the mended run is woken");
    assertEquals(1, events(torn, "step_completed"));
    assertEquals(
        "owner-dead",
        BackstopTest.byRun(taken).get(torn).path("reason").asText(),
        taken.json().toString());
    api.complete(peer, taken, List.of()).expect(200);
    api.leave(peer).expect(204);
  }

  @Test
  void aStepALivePeerStartedAgainIsNotMendedBesideIt() throws Exception {
    Instance peer = bootedPeer();
    String worker = "worker-" + deploy;
    // The victim's step message started the step, then a live peer started it again by a message
    // of its own; the row is completed, its event not written yet: it may be the peer's.
    String run = beta.tornStepCompletedStartedAgainByAPeer(worker, "worker-peer-" + deploy);
    victimDiesWhileThePeerReports(peer, List.of(worker), List.of(run));

    // A mend now could write the event the peer is about to write: a log that completes a step
    // twice fails the run.
    assertEquals(0, events(run, "step_completed"));
    assertEquals(0, mends(run));
    api.leave(peer).expect(204);
  }

  @Test
  void aTornRunAWorkerIsDeliveringIsNotMendedBesideIt() throws Exception {
    Instance peer = bootedPeer();
    // The victim reported the run; no live instance does, but a peer's worker holds its job: the
    // peer took the run up a moment ago and has not reported it yet. The row it completed without
    // its event may be that peer's write half-way through.
    String run = beta.tornStepCompletedLockedBy("worker-peer-" + deploy);
    Instance victim = api.register(SourceTables.ENGINE, deploy, "victim", List.of());
    api.heartbeat(victim, List.of(run)).expect(200);
    TimeTravel.leaseExpired(victim);
    reaper.runOnce().await().indefinitely();

    assertEquals(0, events(run, "step_completed"));
    assertEquals(0, mends(run));
    api.leave(peer).expect(204);
  }

  @Test
  void aStepInterruptedWhileADeadStepMessageOwnedItIsReDrivenWithThatMessageOnceItsJobCannotRun()
      throws Exception {
    Instance peer = bootedPeer();
    String worker = "worker-" + deploy;
    String run = beta.midInlineStepOwnedByAStepMessageLockedBy(worker);
    String owner =
        Db.column(
                "SELECT rollcall.cbor_text(payload_cbor, 'ownerMessageId')"
                    + " FROM workflow.workflow_events WHERE run_id = ? AND type = 'step_started'"
                    + " ORDER BY id DESC LIMIT 1",
                run)
            .get(0);
    // A live peer executes a sibling step: the run is live-owned, and the released step message's
    // job is still in the queue.
    victimDiesWhileThePeerReports(peer, List.of(worker), List.of(run));
    // That job keeps the owner's message: its key (its step's) is gone, so a replay on a peer that
    // queues the step again adds a job of its own instead of overwriting the message.
    assertEquals(List.of("unkeyed"), ownerJobs(owner));

    TimeTravel.deferredAnHourAgo(run);
    assertEquals(List.of(), drain(peer), "not while the live peer reports it");
    peerLetsGo(peer, run);
    // Its own job delivers the owner's message: a re-drive beside it would deliver it twice.
    assertEquals(List.of(), drain(peer), "not while the owner message's job can still run");
    assertEquals(
        List.of("has-queued-job:" + owner),
        Db.column(
            "SELECT reason || ':' || owner_message_id FROM rollcall.deferred WHERE run_id = ?",
            run));

    // The job runs out of attempts without re-running the step: the re-drive is owed now.
    Db.update(
        "UPDATE graphile_worker._private_jobs SET attempts = max_attempts"
            + " WHERE payload ->> 'messageId' = ?",
        owner);
    TimeTravel.deferredAnHourAgo(run);
    Batch taken = api.claimBatch(peer, 100);
    assertTrue(taken != null && taken.runIds().contains(run), "the run is re-driven");
    JsonNode r = BackstopTest.byRun(taken).get(run);
    assertEquals("owner-dead", r.path("reason").asText(), taken.json().toString());
    assertEquals(owner, r.path("messageId").asText());
    api.complete(peer, taken, List.of()).expect(200);
    // The takeover is over once its deferred run is settled.
    assertEquals(
        0,
        Db.number(
            "SELECT count(*) FROM rollcall.epochs WHERE kind = 'takeover' AND state = 'open'"
                + " AND namespace = ?",
            SourceTables.ENGINE));
    api.leave(peer).expect(204);
  }

  /** The queued jobs carrying {@code messageId}: "keyed" or "unkeyed" each. */
  private static List<String> ownerJobs(String messageId) {
    return Db.column(
        "SELECT CASE WHEN key IS NULL THEN 'unkeyed' ELSE 'keyed' END"
            + " FROM graphile_worker._private_jobs WHERE payload ->> 'messageId' = ? ORDER BY id",
        messageId);
  }

  @Test
  void aFourXRunWhoseStepJobTheDeadWorkerHeldIsLeftToThatJobNotReDrivenBesideIt() {
    Instance peer = bootedPeer();
    String worker = "worker-" + deploy;
    // The 4.x line queues a step on a task of its own: the dead worker held the step's job.
    String run = stable.midStepLockedBy(worker);
    Instance victim = api.register(SourceTables.ENGINE, deploy, "victim", List.of(worker));
    api.heartbeat(victim, List.of(run)).expect(200);
    TimeTravel.leaseExpired(victim);
    reaper.runOnce().await().indefinitely();

    // Released, the step's job runs the step again and then queues the workflow's next message: a
    // re-drive beside it would run the step twice at once.
    assertEquals(List.of(), drain(peer));
    assertEquals(
        List.of("has-queued-job"),
        Db.column("SELECT reason FROM rollcall.deferred WHERE run_id = ?", run));
    api.leave(peer).expect(204);
  }

  @Test
  void aTornWaitInARunAPeerStillReportedIsMendedOnceNoneDoesAndTheRunIsQuiet() {
    Instance peer = bootedPeer();
    String torn = beta.tornWaitCompleted();
    // The peer delivers the run: the takeover cannot tell whose the wait row is.
    beta.deliveringBy(torn, "worker-peer-" + deploy);
    victimDiesWhileThePeerReports(peer, List.of(), List.of(torn));
    assertEquals(
        List.of("completed"),
        Db.column("SELECT status::text FROM workflow.workflow_waits WHERE run_id = ?", torn));
    TimeTravel.deferredAnHourAgo(torn);
    rechecks.runOnce().await().indefinitely();
    assertEquals(
        List.of("completed"),
        Db.column("SELECT status::text FROM workflow.workflow_waits WHERE run_id = ?", torn),
        "not while a live instance reports the run");

    peerLetsGo(peer, torn);
    TimeTravel.engineQuiet(torn);
    rechecks.runOnce().await().indefinitely();
    assertEquals(
        List.of("waiting"),
        Db.column("SELECT status::text FROM workflow.workflow_waits WHERE run_id = ?", torn),
        "rolled back once no one reports it and the engine wrote nothing for the fence");
    assertEquals(1, mends(torn));
    drain(peer);
    api.leave(peer).expect(204);
  }

  @Test
  void theServiceReDrivesADeferredRunWhenItsRecheckIsDueWithoutWaitingForAClaim() throws Exception {
    Instance peer = bootedPeer();
    String worker = "worker-" + deploy;
    String run = beta.midInlineStepOwnedByAStepMessageLockedBy(worker);
    victimDiesWhileThePeerReports(peer, List.of(worker), List.of(run));

    TimeTravel.deferredAnHourAgo(run);
    assertEquals(0, rechecks.runOnce().await().indefinitely(), "still reported by the peer");
    assertEquals(0, readyBatchesOf(run));
    peerLetsGo(peer, run);
    // The released job of the owner message ran out of attempts: only a re-drive wakes the run.
    Db.update(
        "UPDATE graphile_worker._private_jobs SET attempts = max_attempts"
            + " WHERE payload ->> 'messageId' = (SELECT owner_message_id FROM rollcall.deferred"
            + " WHERE run_id = ?)",
        run);
    assertEquals(1, rechecks.runOnce().await().indefinitely());
    // Cut ready, as a takeover's batches are: the next claim of any instance takes it.
    assertEquals(1, readyBatchesOf(run));
    Batch taken = api.claimBatch(peer, 100);
    assertTrue(taken != null && taken.runIds().contains(run));
    api.complete(peer, taken, List.of()).expect(200);
    api.leave(peer).expect(204);
  }

  private static long readyBatchesOf(String runId) {
    return Db.number(
        "SELECT count(*) FROM rollcall.batch_runs r JOIN rollcall.batches b ON b.id = r.batch_id"
            + " WHERE r.run_id = ? AND b.state = 'ready'",
        runId);
  }

  /** The live peer's next report no longer has {@code runId}, and its re-check is due. */
  private void peerLetsGo(Instance peer, String runId) {
    api.heartbeat(peer, List.of()).expect(200);
    TimeTravel.deferredAnHourAgo(runId);
  }

  /**
   * The victim (naming {@code workers} as its queue workers) and the live peer both report {@code
   * runs}; then the victim's lease runs out and the reaper takes it over.
   */
  private void victimDiesWhileThePeerReports(
      Instance peer, List<String> workers, List<String> runs) {
    Instance victim = api.register(SourceTables.ENGINE, deploy, "victim", workers);
    api.heartbeat(victim, runs).expect(200);
    api.heartbeat(peer, runs).expect(200);
    TimeTravel.leaseExpired(victim);
    reaper.runOnce().await().indefinitely();
  }

  /** How many torn writes of the run Rollcall's ledger says it repaired. */
  private static long mends(String runId) {
    return Db.number(
        "SELECT count(*) FROM rollcall.ledger WHERE run_id = ? AND outcome = 'torn-repaired'",
        runId);
  }

  /** Every run the peer is handed out until nothing is left, each batch completed. */
  private List<String> drain(Instance peer) {
    List<String> handedOut = new java.util.ArrayList<>();
    for (Batch b; (b = api.claimBatch(peer, 100)) != null; ) {
      handedOut.addAll(b.runIds());
      api.complete(peer, b, List.of()).expect(200);
    }
    return handedOut;
  }

  @Test
  void aPassThatHandsATornRunOutMendsItFirst() throws Exception {
    String torn = beta.tornStepCompleted();
    TimeTravel.engineQuiet(torn);
    Instance claimer = api.register(SourceTables.ENGINE, deploy, "claimer");
    boolean handedOut = false;
    for (Batch b; (b = api.claimBatch(claimer, 5000)) != null; ) {
      handedOut |= b.runIds().contains(torn);
      api.complete(claimer, b, List.of()).expect(200);
    }
    assertTrue(handedOut, "the torn run has no live wake path: the boot pass re-drives it");
    assertEquals(1, events(torn, "step_completed"));
    assertEquals(
        List.of("no-live-wake-path"),
        Db.column(
            "SELECT reason FROM rollcall.ledger WHERE run_id = ? AND outcome = 'torn-repaired'",
            torn));
    api.leave(claimer).expect(204);
  }

  @Test
  void twoMendersOfOneRunAtOnceWriteItsMissingEventOnce() throws Exception {
    String torn = beta.tornStepCompleted();
    RunSource source = sources.get(SourceTables.ENGINE);
    CompletableFuture<Void> release = new CompletableFuture<>();
    CompletableFuture<List<Mend>> first = new CompletableFuture<>();
    CompletableFuture<List<Mend>> firstMended = new CompletableFuture<>();
    // The first mender mends and keeps its transaction open until released.
    pool.withTransaction(
            conn ->
                source
                    .mendTorn(conn, List.of(torn))
                    .invoke(firstMended::complete)
                    .call(mends -> Uni.createFrom().completionStage(release)))
        .subscribe()
        .with(first::complete, first::completeExceptionally);
    assertEquals(1, firstMended.get(30, TimeUnit.SECONDS).size());
    CompletableFuture<List<Mend>> second =
        pool.withTransaction(conn -> source.mendTorn(conn, List.of(torn)))
            .subscribeAsCompletionStage();
    // The second waits for the first (for its lock on the run) while the first is open.
    Poll.until(
        "the second mender waiting for a lock the first holds",
        Duration.ofSeconds(30),
        () -> Db.number("SELECT count(*) FROM pg_locks WHERE NOT granted") > 0);
    assertFalse(second.isDone(), "the second mender went on while the first was open");
    release.complete(null);
    assertEquals(1, first.get(30, TimeUnit.SECONDS).size());
    assertEquals(List.of(), second.get(30, TimeUnit.SECONDS));
    assertEquals(1, events(torn, "step_completed"));
  }

  // ---------------------------------------------------------------- helpers

  Instance bootedPeer() {
    Instance peer = api.register(SourceTables.ENGINE, deploy, "peer");
    api.drain(peer, 5000);
    return peer;
  }

  double repaired() {
    return meters.find("rollcall.torn.repaired").counters().stream()
        .mapToDouble(c -> c.count())
        .sum();
  }

  record Step(String name, String status, byte[] output, byte[] error) {}

  static Step step(String runId) throws SQLException {
    try (Connection c = RollcallTestResource.database().connect();
        PreparedStatement s =
            c.prepareStatement(
                "SELECT step_name, status::text, output_cbor, error_cbor"
                    + " FROM workflow.workflow_steps WHERE run_id = ?")) {
      s.setString(1, runId);
      try (ResultSet rs = s.executeQuery()) {
        assertTrue(rs.next(), "no step of " + runId);
        return new Step(rs.getString(1), rs.getString(2), rs.getBytes(3), rs.getBytes(4));
      }
    }
  }

  static byte[] eventData(String runId, String type) throws SQLException {
    try (Connection c = RollcallTestResource.database().connect();
        PreparedStatement s =
            c.prepareStatement(
                "SELECT payload_cbor FROM workflow.workflow_events WHERE run_id = ? AND type = ?")) {
      s.setString(1, runId);
      s.setString(2, type);
      try (ResultSet rs = s.executeQuery()) {
        assertTrue(rs.next(), "no " + type + " event of " + runId);
        return rs.getBytes(1);
      }
    }
  }

  static long events(String runId, String type) {
    return Db.number(
        "SELECT count(*) FROM workflow.workflow_events WHERE run_id = ? AND type = ?", runId, type);
  }
}
