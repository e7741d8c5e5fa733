package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.EngineRuns;
import dev.rollcall.testing.QueueJobs;
import dev.rollcall.testing.RollcallTestResource;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import dev.rollcall.testing.TimeTravel;
import io.smallrye.mutiny.Uni;
import jakarta.inject.Inject;
import java.sql.Connection;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.postgresql.PGConnection;
import org.postgresql.PGNotification;

/**
 * Queue locks learned from the queue: the worker holding the job of a message an instance reports
 * is that instance's; a death or a leave releases every lock of its workers, orphans are released
 * after the activity fence, and a live instance's lock never is.
 */
@ServiceTest
class QueueLocksTest extends ApiTestBase {

  static final String FLOWS = "workflow_flows";
  static final String STEPS = "workflow_steps";
  static final long HOUR_MS = 3_600_000;

  @Inject Reaper reaper;

  String tag;
  final QueueJobs queue = new QueueJobs();
  final List<Long> jobs = queue.ids();

  @BeforeEach
  void fresh() {
    tag = UUID.randomUUID().toString().substring(0, 8);
    // Instances other tests left behind are reaped first, so each test sees only its own.
    reaper.runOnce().await().indefinitely();
  }

  @AfterEach
  void dropJobs() {
    queue.deleteAll();
  }

  String name(String what) {
    return what + "_" + tag;
  }

  long job(String task, String key, String messageId, String runId, String worker, long ago) {
    return queue.add(task, key, messageId, runId, worker, ago);
  }

  String lockOf(long job) {
    List<String> l =
        Db.column(
            "SELECT coalesce(locked_by, '-') FROM graphile_worker._private_jobs WHERE id = ?", job);
    return l.isEmpty() ? "(gone)" : l.get(0);
  }

  List<String> learned(Instance instance) {
    return Db.column(
        "SELECT worker_id || ':' || message_id FROM rollcall.queue_workers"
            + " WHERE instance_id = ? ORDER BY worker_id",
        instance.id());
  }

  List<String> released(String runId) {
    return Db.column(
        "SELECT reason || '|' || coalesce(instance_id::text, '-') || '|' || detail"
            + " FROM rollcall.ledger WHERE run_id = ? AND outcome = 'lock-released' ORDER BY id",
        runId);
  }

  @Test
  void aWorkerIsLearnedFromTheKeyedJobOfAReportedMessageOnTheNamespacesTasksOnly() {
    Instance app = api.register(SourceTables.ENGINE, name("d"), "app");
    String w1 = name("w1");
    String w2 = name("w2");
    job(FLOWS, name("msg_a"), name("msg_a"), name("wrun_a"), w1, 0);
    job("other_flows", name("msg_b"), name("msg_b"), name("wrun_b"), w2, 0);
    // A job that exists but nobody locked yet teaches nothing.
    job(FLOWS, name("msg_c"), name("msg_c"), name("wrun_c"), null, 0);

    api.heartbeatEntries(
            app,
            List.of(
                Api.execution(name("wrun_a"), name("msg_a")),
                Api.execution(name("wrun_b"), name("msg_b")),
                Api.execution(name("wrun_c"), name("msg_c"))))
        .expect(200);

    assertEquals(List.of(w1 + ":" + name("msg_a")), learned(app));
    // The admin API shows registered and learned workers alike.
    assertTrue(
        api.send(
                "GET",
                "admin/instances?namespace=engine&state=live",
                RollcallTestResource.ADMIN_TOKEN,
                null)
            .expect(200)
            .body()
            .toString()
            .contains(w1));
    api.leave(app).expect(204);
  }

  @Test
  void aMessageIsLookedUpAtEveryHeartbeatUntilItsJobIsFoundLockedThenNoMore() {
    Instance app = api.register(SourceTables.ENGINE, name("d"), "app");
    Instance other = api.register(SourceTables.ENGINE, name("d"), "other");
    long pending = job(FLOWS, name("msg_p"), name("msg_p"), name("wrun_p"), null, 0);
    var report = List.of(Api.execution(name("wrun_p"), name("msg_p")));
    api.heartbeatEntries(app, report).expect(200);
    assertEquals(List.of(), learned(app), "not locked yet: nothing to learn");

    Db.update(
        "UPDATE graphile_worker._private_jobs SET locked_by = ? WHERE id = ?", name("w1"), pending);
    api.heartbeatEntries(app, report).expect(200);
    assertEquals(List.of(name("w1") + ":" + name("msg_p")), learned(app), "looked up again, found");

    // Locked again by another worker while the instance still reports the message: its report is
    // not looked up again, so the new worker is not taken for the instance's.
    Db.update(
        "UPDATE graphile_worker._private_jobs SET locked_by = ? WHERE id = ?", name("w2"), pending);
    api.heartbeatEntries(app, report).expect(200);
    assertEquals(List.of(name("w1") + ":" + name("msg_p")), learned(app));
    // The instance that reports it anew shows the new worker.
    api.heartbeatEntries(other, report).expect(200);
    assertEquals(List.of(name("w2") + ":" + name("msg_p")), learned(other));
    api.leave(app).expect(204);
    api.leave(other).expect(204);
  }

  @Test
  void aDeathReleasesEveryLockOfTheInstancesWorkersNotOnlyThoseOfItsLastReport() {
    Instance peer = api.register(SourceTables.ENGINE, name("d"), "peer");
    Instance victim = api.register(SourceTables.ENGINE, name("d"), "victim");
    String w = name("w");
    long reported = job(FLOWS, name("msg_1"), name("msg_1"), name("wrun_1"), w, 0);
    api.heartbeatEntries(victim, List.of(Api.execution(name("wrun_1"), name("msg_1")))).expect(200);
    // After its last heartbeat, the same worker picked up another job; it never reported it.
    long later = job(FLOWS, name("msg_2"), name("msg_2"), name("wrun_2"), w, 0);
    // A job the worker locked whose message a live peer reports executing is never released.
    long peers = job(STEPS, name("msg_3"), name("msg_3"), name("wrun_3"), w, 0);
    api.heartbeatEntries(peer, List.of(Api.execution(name("wrun_3"), name("msg_3")))).expect(200);
    long otherNamespace = job("other_flows", name("msg_4"), name("msg_4"), name("wrun_4"), w, 0);
    TimeTravel.leaseExpired(victim);

    reaper.runOnce().await().indefinitely();

    assertEquals("-", lockOf(reported));
    assertEquals("-", lockOf(later));
    assertEquals(w, lockOf(peers));
    assertEquals(w, lockOf(otherNamespace));
    List<String> proof = released(name("wrun_2"));
    assertEquals(1, proof.size(), proof.toString());
    assertTrue(
        proof.get(0).startsWith("owner-dead|" + victim.id() + "|released job " + later),
        proof.get(0));
    assertTrue(proof.get(0).contains("learned for instance " + victim.id()), proof.get(0));
    assertTrue(proof.get(0).contains("from message " + name("msg_1")), proof.get(0));
    assertEquals(1, released(name("wrun_1")).size());
    // The takeover covers the run picked up after the last report too.
    assertEquals(
        1,
        Db.number(
            "SELECT count(*) FROM rollcall.ledger l JOIN rollcall.epochs e ON e.id = l.epoch_id"
                + " WHERE e.subject_instance_id = ? AND l.run_id = ?"
                + " AND l.outcome NOT IN ('lock-released')",
            victim.id(),
            name("wrun_2")));
    api.leave(peer).expect(204);
  }

  @Test
  void workersNamedInHeartbeatsAreTheInstancesFromThenOnAndTheirLocksGoAtItsDeath() {
    Instance peer = api.register(SourceTables.ENGINE, name("d"), "peer");
    Instance victim = api.register(SourceTables.ENGINE, name("d"), "victim", List.of(name("w0")));
    // Found after registration, one beat at a time; a name sent twice is kept once.
    api.heartbeatWorkers(victim, List.of(name("w1"), name("w2"), name("w1"))).expect(200);
    api.heartbeatWorkers(victim, List.of(name("w2"), name("w3"))).expect(200);
    api.heartbeatWorkers(peer, List.of(name("wp"))).expect(200);
    assertEquals(
        List.of("{" + String.join(",", name("w0"), name("w1"), name("w2"), name("w3")) + "}"),
        Db.column("SELECT worker_ids::text FROM rollcall.instances WHERE id = ?", victim.id()));
    // Jobs the victim's workers locked but whose messages it never reported: only the named
    // workers tell whose they are. An hour old, yet not orphans while their instance lives.
    long named = job(FLOWS, name("msg_1"), name("msg_1"), name("wrun_1"), name("w3"), HOUR_MS);
    long peers = job(FLOWS, name("msg_2"), name("msg_2"), name("wrun_2"), name("wp"), HOUR_MS);
    reaper.releaseOrphans().await().indefinitely();
    assertEquals(name("w3"), lockOf(named));
    assertEquals(name("wp"), lockOf(peers));

    TimeTravel.leaseExpired(victim);
    reaper.runOnce().await().indefinitely();

    assertEquals("-", lockOf(named));
    assertEquals(name("wp"), lockOf(peers), "a live peer's named worker");
    List<String> proof = released(name("wrun_1"));
    assertEquals(1, proof.size(), proof.toString());
    assertTrue(proof.get(0).contains("named by instance " + victim.id()), proof.get(0));
    api.leave(peer).expect(204);
  }

  @Test
  void aReleaseWakesTheQueuesIdleWorkersWhenItCommits() throws Exception {
    Instance victim = api.register(SourceTables.ENGINE, name("d"), "victim", List.of(name("w")));
    job(FLOWS, name("msg_1"), name("msg_1"), name("wrun_1"), name("w"), 0);
    job(FLOWS, name("msg_2"), name("msg_2"), name("wrun_2"), name("w"), 0);
    try (Connection listener = Db.database().connect()) {
      try (Statement st = listener.createStatement()) {
        st.execute("LISTEN \"jobs:insert\"");
      }
      PGConnection pg = listener.unwrap(PGConnection.class);
      TimeTravel.leaseExpired(victim);
      reaper.runOnce().await().indefinitely();
      // graphile-worker's runners nudge up to `count` idle workers on this channel.
      List<String> payloads = new ArrayList<>();
      long deadline = System.nanoTime() + 5_000_000_000L;
      while (payloads.isEmpty() && System.nanoTime() < deadline) {
        PGNotification[] got = pg.getNotifications(500);
        if (got != null) {
          for (PGNotification n : got) {
            payloads.add(n.getName() + " " + n.getParameter());
          }
        }
      }
      // Both locks were released by one statement, so one notification counts them (at least).
      assertEquals(1, payloads.size(), payloads.toString());
      assertTrue(
          payloads.get(0).matches("jobs:insert \\{\"count\":([2-9]|\\d\\d+)\\}"), payloads.get(0));
    }
  }

  @Test
  void aLeaveReleasesTheLocksOfTheJobsItsLastReportNamesEvenUnderAnIdempotencyKey() {
    Instance leaving = api.register(SourceTables.ENGINE, name("d"), "leaving");
    String w = name("w");
    // Keyed by an idempotency key, not by its message id: found through the payload.
    long keyed = job(FLOWS, name("step_1:backstop:1"), name("msg_1"), name("wrun_1"), w, 0);
    long sameWorker = job(FLOWS, name("msg_2"), name("msg_2"), name("wrun_2"), w, 0);

    api.leaveEntries(leaving, List.of(Api.execution(name("wrun_1"), name("msg_1")))).expect(204);

    assertEquals("-", lockOf(keyed));
    assertEquals("-", lockOf(sameWorker));
    assertEquals(List.of(w + ":" + name("msg_1")), learned(leaving));
    assertEquals(1, released(name("wrun_2")).size());
  }

  @Test
  void orphanedLocksOlderThanTheFenceAreReleasedAndNoLiveInstancesLockEver() {
    Instance live = api.register(SourceTables.ENGINE, name("d"), "live", List.of(name("wreg")));
    String learnedWorker = name("wlearned");
    long learnedJob = job(FLOWS, name("msg_l"), name("msg_l"), name("wrun_l"), learnedWorker, 0);
    // Reported under an idempotency key: not learned, but its message is reported by a live one.
    long reportedJob =
        job(FLOWS, name("corr:backstop:9"), name("msg_r"), name("wrun_r"), name("wrep"), HOUR_MS);
    // Reported by run only (no message id): its job, whatever the task, is not an orphan either.
    long runOnly = job(STEPS, name("msg_s"), name("msg_s"), name("wrun_s"), name("wrun"), HOUR_MS);
    api.heartbeatEntries(
            live,
            List.of(
                Api.execution(name("wrun_l"), name("msg_l")),
                Api.execution(name("wrun_r"), name("msg_r")),
                Api.execution(name("wrun_s"), null)))
        .expect(200);
    assertEquals(List.of(learnedWorker + ":" + name("msg_l")), learned(live));
    Db.update(
        "UPDATE graphile_worker._private_jobs SET locked_at = now() - interval '1 hour'"
            + " WHERE id = ?",
        learnedJob);
    long registeredJob =
        job(STEPS, name("msg_g"), name("msg_g"), name("wrun_g"), name("wreg"), HOUR_MS);
    long orphan = job(FLOWS, name("msg_o"), name("msg_o"), name("wrun_o"), name("wgone"), HOUR_MS);
    long young = job(FLOWS, name("msg_y"), name("msg_y"), name("wrun_y"), name("wnew"), 0);
    long unkeyed = job(FLOWS, null, name("msg_u"), name("wrun_u"), name("wgone"), HOUR_MS);
    long foreign =
        job("other_flows", name("msg_f"), name("msg_f"), name("wrun_f"), name("wgone"), HOUR_MS);

    int n = reaper.releaseOrphans().await().indefinitely();

    assertTrue(n >= 1);
    assertEquals(learnedWorker, lockOf(learnedJob), "a live instance's learned worker");
    assertEquals(name("wreg"), lockOf(registeredJob), "a live instance's registered worker");
    assertEquals(name("wrep"), lockOf(reportedJob), "a message a live instance reports");
    assertEquals(name("wrun"), lockOf(runOnly), "a run a live instance reports");
    assertEquals("-", lockOf(orphan));
    assertEquals(name("wnew"), lockOf(young), "younger than the activity fence");
    assertEquals(name("wgone"), lockOf(unkeyed), "no key: nothing would report it");
    assertEquals(name("wgone"), lockOf(foreign), "another namespace's task");
    List<String> proof = released(name("wrun_o"));
    assertEquals(1, proof.size());
    assertTrue(proof.get(0).startsWith("orphaned-lock|-|released job " + orphan), proof.get(0));
    assertTrue(proof.get(0).contains("no instance owns the worker"), proof.get(0));
    assertEquals(
        List.of(""),
        Db.column(
            "SELECT coalesce(epoch_id::text, '') FROM rollcall.ledger WHERE run_id = ?",
            name("wrun_o")));

    // Its lease ran out, but it is not declared dead yet: its locks are its takeover's to release
    // (with the mends of what its death tore), not orphans.
    TimeTravel.leaseExpired(live);
    reaper.releaseOrphans().await().indefinitely();
    assertEquals(name("wreg"), lockOf(registeredJob), "a worker of an instance not dead yet");
    assertEquals(learnedWorker, lockOf(learnedJob), "a message such an instance reports");
    assertEquals(name("wrun"), lockOf(runOnly), "a run such an instance reports");
    // Once the instance is dead, its learned worker's old lock is an orphan like any other.
    Db.update("UPDATE rollcall.instances SET state = 'dead' WHERE id = ?", live.id());
    reaper.releaseOrphans().await().indefinitely();
    assertEquals("-", lockOf(learnedJob));
    assertTrue(released(name("wrun_l")).get(0).contains("it was instance " + live.id()));
  }

  @Test
  void serviceReplicasReleasingOrphansAtOnceReleaseEachLockOnce() {
    int n = 3000;
    List<String> ids =
        Db.column(
            "SELECT (graphile_worker.add_job('workflow_flows', ?::json,"
                + " job_key => ?::text || g)).id::text FROM generate_series(1, ?) g",
            EngineRuns.flowsPayload(name("msg"), "wf", name("wrun_race"), 1),
            name("msg_"),
            n);
    ids.forEach(id -> jobs.add(Long.parseLong(id)));
    Db.update(
        "UPDATE graphile_worker._private_jobs SET locked_by = ?::text || (id % 5),"
            + " locked_at = now() - interval '1 hour' WHERE id = ANY(?::bigint[])",
        name("wgone"), TakeoverTest.pgArray(jobs));

    List<Integer> passes =
        Uni.join()
            .all(
                reaper.releaseOrphans(),
                reaper.releaseOrphans(),
                reaper.releaseOrphans(),
                reaper.releaseOrphans())
            .andFailFast()
            .await()
            .indefinitely();

    assertEquals(
        0,
        Db.number(
            "SELECT count(*) FROM graphile_worker._private_jobs"
                + " WHERE id = ANY(?::bigint[]) AND locked_by IS NOT NULL",
            TakeoverTest.pgArray(jobs)));
    assertTrue(passes.stream().mapToInt(Integer::intValue).sum() >= n, passes.toString());
    assertEquals(
        n,
        Db.number(
            "SELECT count(*) FROM rollcall.ledger WHERE run_id = ? AND outcome = 'lock-released'",
            name("wrun_race")));
  }

  /**
   * The schedule's look for orphaned locks reads every locked job of each namespace: service
   * replicas take turns, and one of them looks per interval. Replicas whose schedules fire at once
   * look once between them; the one that looked looks again once its turn is over.
   */
  @Test
  void serviceReplicasLookForOrphanedLocksInTurn() {
    Db.update("UPDATE rollcall.housekeeping SET lease_until = '-infinity' WHERE job = ?", TURN);
    long orphan = job(FLOWS, name("msg_t"), name("msg_t"), name("wrun_t"), name("wgone"), HOUR_MS);

    List<Optional<Integer>> looks =
        Uni.join()
            .all(
                reaper.releaseOrphansInTurn(),
                reaper.releaseOrphansInTurn(),
                reaper.releaseOrphansInTurn(),
                reaper.releaseOrphansInTurn())
            .andFailFast()
            .await()
            .indefinitely();

    assertEquals(1, looks.stream().filter(Optional::isPresent).count(), looks.toString());
    assertEquals("-", lockOf(orphan));
    assertTrue(
        Db.number(
                "SELECT count(*) FROM rollcall.housekeeping WHERE job = ? AND lease_until > now()",
                TURN)
            == 1,
        "the turn is leased past now");
    assertTrue(reaper.releaseOrphansInTurn().await().indefinitely().isEmpty(), "within the turn");

    // The turn is over (by the database's clock): the next look reads the queue again.
    long next = job(FLOWS, name("msg_u"), name("msg_u"), name("wrun_u"), name("wgone"), HOUR_MS);
    Db.update(
        "UPDATE rollcall.housekeeping SET lease_until = now() - interval '1 millisecond'"
            + " WHERE job = ?",
        TURN);
    assertTrue(reaper.releaseOrphansInTurn().await().indefinitely().isPresent());
    assertEquals("-", lockOf(next));
  }

  static final String TURN = "orphaned-locks";
}
