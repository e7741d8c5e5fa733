package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.rollcall.testing.Api.Batch;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.Poll;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import dev.rollcall.testing.TimeTravel;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import io.smallrye.mutiny.Uni;
import jakarta.inject.Inject;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Dead and departed instances: their runs are taken over within seconds, and they are fenced. */
@ServiceTest
class TakeoverTest extends ApiTestBase {

  @Inject Reaper reaper;
  @Inject MeterRegistry meters;

  String deploy;

  @BeforeEach
  void freshDeploy() {
    deploy = UUID.randomUUID().toString();
  }

  List<String> activeRuns(int n) {
    return Db.activeRuns(SourceTables.SMALL).stream().sorted().limit(n).toList();
  }

  /** Finishes the peer's own boot epoch so that its claims see only takeover work. */
  Instance bootedPeer(String name) {
    Instance peer = api.register(SourceTables.SMALL, deploy, name);
    api.drain(peer, 100);
    return peer;
  }

  @Test
  void aKilledInstancesInFlightRunsGoToAnotherInstanceAndTheDeadOneIsFenced() {
    Instance peer = bootedPeer("peer");
    Instance victim = api.register(SourceTables.SMALL, "next-" + deploy, "victim");
    List<String> inFlight = activeRuns(3);
    api.heartbeat(victim, inFlight).expect(200);
    Batch held = heldBatch(victim);
    TimeTravel.leaseExpired(victim);

    Reaper.Pass pass = reaper.runOnce().await().indefinitely();

    // Instances other tests left behind may expire and be reaped in the same pass.
    assertTrue(pass.reaped() >= 1);
    assertEquals(
        "dead", Db.column("SELECT state FROM rollcall.instances WHERE id = ?", victim.id()).get(0));
    assertTrue(api.heartbeat(peer).expect(200).body().get("recoveryPending").asBoolean());
    Batch taken = api.claimBatch(peer, 100);
    assertEquals("takeover", taken.json().get("epochKind").asText());
    assertEquals(
        Set.copyOf(inFlight),
        Set.copyOf(taken.runIds()),
        () ->
            Db.column(
                    "SELECT run_id || ':' || outcome || ':' || reason FROM rollcall.ledger"
                        + " WHERE epoch_id = ?",
                    taken.epochId())
                .toString());
    for (JsonNode run : taken.json().get("runs")) {
      assertEquals("owner-dead", run.get("reason").asText());
      assertEquals(victim.id().toString(), run.get("deadInstanceId").asText());
    }
    api.heartbeat(victim).expect(410);
    api.claim(victim, 10).expect(410);
    api.complete(victim, held, List.of()).expect(410);
    api.complete(peer, taken, List.of()).expect(200);
    assertEquals(
        "closed",
        Db.column("SELECT state FROM rollcall.epochs WHERE id = ?", taken.epochId()).get(0));
  }

  @Test
  void aHeartbeatSaysWhenToCheckAgainWhileAPeerHoldingRunsIsAboutToBeDeclaredDead() {
    // A namespace no other service test registers in: their instances' leases would count too.
    Instance watcher = api.register(SourceTables.BENCH, deploy, "watcher");
    Instance peer = api.register(SourceTables.BENCH, deploy, "peer");
    api.heartbeat(peer, List.of("wrun_a", "wrun_b")).expect(200);
    assertNull(recheckAfterMs(watcher), "a healthy peer renews a full lease ahead");

    // The peer's lease runs out in 1.5 s, before the watcher's next beat: beat again once the
    // reaper (1 s, its default, assumed while off here) has had time to open the takeover.
    leaseLeft(peer, 1500);
    long recheck = recheckAfterMs(watcher);
    assertTrue(recheck > 2000 && recheck <= 2600, "recheck after " + recheck + " ms");

    // Ran out half a second ago, not reaped yet: once the reaper has had its interval.
    leaseLeft(peer, -500);
    recheck = recheckAfterMs(watcher);
    assertTrue(recheck > 400 && recheck <= 600, "recheck after " + recheck + " ms");

    // Ran out just over a reaper interval ago: soon, not at once.
    leaseLeft(peer, -1500);
    assertEquals(250, recheckAfterMs(watcher));

    // The reaper is far behind: no faster beats, the usual ones carry the news.
    leaseLeft(peer, -5000);
    assertNull(recheckAfterMs(watcher));

    // A peer that holds nothing has nothing to take over.
    Db.update("DELETE FROM rollcall.ownership WHERE instance_id = ?", peer.id());
    leaseLeft(peer, 1500);
    assertNull(recheckAfterMs(watcher));
    api.leave(peer).expect(204);
    api.leave(watcher).expect(204);
  }

  Long recheckAfterMs(Instance instance) {
    JsonNode recheck = api.heartbeat(instance).expect(200).body().get("recheckAfterMs");
    return recheck == null ? null : recheck.asLong();
  }

  static void leaseLeft(Instance instance, long ms) {
    Db.update(
        "UPDATE rollcall.instances SET lease_expires_at = now() + ? * interval '1 millisecond'"
            + " WHERE id = ?",
        ms,
        instance.id());
  }

  /** A batch of a fresh deploy's boot epoch, leased to this instance. */
  Batch heldBatch(Instance instance) {
    return api.claimBatch(instance, 1);
  }

  @Test
  void theBatchesADeadInstanceHeldAreReleasedAtOnce() {
    Instance victim = api.register(SourceTables.SMALL, deploy, "victim");
    Batch held = api.claimBatch(victim, 5);
    TimeTravel.leaseExpired(victim);
    reaper.runOnce().await().indefinitely();

    Instance peer = api.register(SourceTables.SMALL, deploy, "peer");
    Batch again = api.claimBatch(peer, 5);

    assertEquals(held.id(), again.id());
    assertEquals(held.fence() + 1, again.fence());
  }

  @Test
  void aGracefulLeaveOpensTheTakeoverAtOnce() {
    Instance peer = bootedPeer("peer");
    Instance leaving = api.register(SourceTables.SMALL, deploy, "leaving");
    List<String> last = activeRuns(2);

    api.leave(leaving, last).expect(204);

    Batch taken = api.claimBatch(peer, 100);
    assertEquals("takeover", taken.json().get("epochKind").asText());
    assertEquals(Set.copyOf(last), Set.copyOf(taken.runIds()));
    assertEquals(
        List.of(""),
        Db.column(
            "SELECT coalesce(subject_lease_expired_at::text, '') FROM rollcall.epochs WHERE id = ?",
            taken.epochId()));
    api.complete(peer, taken, List.of()).expect(200);
  }

  @Test
  void anExitingLeaveOpensTheTakeoverOnlyOnceItsDepartureGraceRanOut() throws Exception {
    Instance peer = bootedPeer("peer");
    Instance leaving = api.register(SourceTables.SMALL, deploy, "leaving");
    List<String> last = activeRuns(2);

    api.exitingLeave(leaving, last).expect(204);

    // Its process may still be executing until it exits: nothing is taken over yet, and its
    // lease now ends within the departure grace (1 s), never later than it would have.
    reaper.runOnce().await().indefinitely();
    assertEquals(
        List.of("live:true"),
        Db.column(
            "SELECT state || ':' || (lease_expires_at <= now() + interval '1 second')"
                + " FROM rollcall.instances WHERE id = ?",
            leaving.id()));
    assertEquals(
        0L,
        Db.number(
            "SELECT count(*) FROM rollcall.epochs WHERE subject_instance_id = ?", leaving.id()));
    assertEquals(
        Set.copyOf(last),
        Set.copyOf(
            Db.column(
                "SELECT run_id FROM rollcall.ownership WHERE instance_id = ?", leaving.id())));

    // Once the grace ran out, the reaper takes its last in-flight set over as for a crash.
    Poll.until(
        "the departure grace runs out",
        Duration.ofSeconds(5),
        () ->
            Db.column(
                    "SELECT (lease_expires_at <= now())::text FROM rollcall.instances WHERE id = ?",
                    leaving.id())
                .equals(List.of("true")));
    reaper.runOnce().await().indefinitely();
    Batch taken = api.claimBatch(peer, 100);
    assertEquals("takeover", taken.json().get("epochKind").asText());
    assertEquals(Set.copyOf(last), Set.copyOf(taken.runIds()));
    api.complete(peer, taken, List.of()).expect(200);
    api.heartbeat(leaving).expect(410);
    api.exitingLeave(leaving, List.of()).expect(410);
  }

  @Test
  void takeoverRunsThatFinishedAreSkippedAndThoseALivePeerRunsDeferred() {
    Instance peer = bootedPeer("peer");
    Instance victim = api.register(SourceTables.SMALL, deploy, "victim");
    List<String> runs = activeRuns(3);
    String terminal =
        Db.column(
                "SELECT id FROM "
                    + SourceTables.table(SourceTables.SMALL)
                    + " WHERE status = 'completed' LIMIT 1")
            .get(0);
    List<String> inFlight = new ArrayList<>(runs);
    inFlight.add(terminal);
    api.heartbeat(victim, inFlight).expect(200);
    api.heartbeat(peer, List.of(runs.get(0))).expect(200);
    TimeTravel.leaseExpired(victim);
    reaper.runOnce().await().indefinitely();

    Batch taken = api.claimBatch(peer, 100);

    assertEquals(Set.of(runs.get(1), runs.get(2)), Set.copyOf(taken.runIds()));
    // The live peer's run is deferred (its report may be a heartbeat old), the finished one
    // skipped.
    assertEquals(
        Set.of(runs.get(0) + ":deferred:owned-by-live-instance", terminal + ":skipped:terminal"),
        Db.set(
            "SELECT run_id || ':' || outcome || ':' || reason FROM rollcall.ledger"
                + " WHERE epoch_id = ? AND outcome IN ('skipped', 'deferred')",
            taken.epochId()));
    api.complete(peer, taken, List.of()).expect(200);
  }

  @Test
  void serviceReplicasReapingAtOnceOpenOneTakeoverPerDeadInstance() {
    List<Instance> victims = new ArrayList<>();
    for (int i = 0; i < 20; i++) {
      Instance v = api.register(SourceTables.SMALL, deploy, "victim-" + i);
      api.heartbeat(v, activeRuns(2)).expect(200);
      victims.add(v);
    }
    victims.forEach(TimeTravel::leaseExpired);

    List<Reaper.Pass> passes =
        Uni.join()
            .all(reaper.runOnce(), reaper.runOnce(), reaper.runOnce(), reaper.runOnce())
            .andFailFast()
            .await()
            .indefinitely();

    // Instances that other tests left behind may expire now and be reaped by these passes too.
    assertTrue(passes.stream().mapToInt(Reaper.Pass::reaped).sum() >= 20);
    assertEquals(0, passes.stream().mapToInt(Reaper.Pass::failed).sum());
    for (Instance v : victims) {
      assertEquals(
          1,
          Db.number(
              "SELECT count(*) FROM rollcall.epochs WHERE kind = 'takeover'"
                  + " AND subject_instance_id = ?",
              v.id()));
    }
  }

  @Test
  void aHeartbeatJustBeforeTheReaperKeepsTheInstanceAlive() {
    Instance alive = api.register(SourceTables.SMALL, deploy, "alive");
    Db.update(
        "UPDATE rollcall.instances SET lease_expires_at = now() + interval '2 seconds'"
            + " WHERE id = ?",
        alive.id());
    api.heartbeat(alive).expect(200);
    // The lease that was to run out in 2 s has run out now, unless the heartbeat renewed it (by the
    // lease TTL, 10 s): the reaper declares the instance dead unless the beat counted.
    Db.update(
        "UPDATE rollcall.instances SET lease_expires_at = lease_expires_at - interval '2 seconds'"
            + " WHERE id = ?",
        alive.id());

    reaper.runOnce().await().indefinitely();

    assertEquals(
        "live", Db.column("SELECT state FROM rollcall.instances WHERE id = ?", alive.id()).get(0));
  }

  @Test
  void detectionLatencyIsRecordedPerNamespace() {
    Instance victim = api.register(SourceTables.SMALL, deploy, "victim");
    TimeTravel.leaseExpired(victim, Duration.ofSeconds(2));
    Timer timer = meters.find("rollcall.dead.owner.detection").tag("namespace", "small").timer();
    long before = timer == null ? 0 : timer.count();

    reaper.runOnce().await().indefinitely();

    timer = meters.find("rollcall.dead.owner.detection").tag("namespace", "small").timer();
    assertTrue(timer.count() >= before + 1);
    assertTrue(timer.max(java.util.concurrent.TimeUnit.MILLISECONDS) >= 2000);
  }

  @Test
  void aDeadInstancesQueueLocksAreReleasedOnlyForItsWorkersAndItsNamespacesTasks() {
    String dead = "worker-dead-" + deploy;
    String live = "worker-live-" + deploy;
    String run = "wrun_lock_" + deploy;
    String data =
        java.util.Base64.getEncoder().encodeToString(("{\"runId\":\"" + run + "\"}").getBytes());
    String payload = "{\"id\":\"w\",\"data\":\"" + data + "\",\"attempt\":1,\"messageId\":\"m\"}";
    List<Long> jobs = new ArrayList<>();
    for (String task :
        List.of("workflow_flows", "workflow_steps", "other_flows", "workflow_flows")) {
      jobs.add(
          Db.number(
              "SELECT id FROM graphile_worker.add_job(?, ?::json, run_at => now() + interval '1 hour')",
              task,
              payload));
    }
    String lock =
        "UPDATE graphile_worker._private_jobs SET locked_by = ?, locked_at = now() WHERE id = ?";
    Db.update(lock, dead, jobs.get(0));
    Db.update(lock, dead, jobs.get(1));
    Db.update(lock, dead, jobs.get(2));
    Db.update(lock, live, jobs.get(3));
    String runAtBefore = runAts(jobs);
    Instance victim = api.register(SourceTables.ENGINE, deploy, "victim", List.of(dead));
    TimeTravel.leaseExpired(victim);

    reaper.runOnce().await().indefinitely();

    assertEquals(
        List.of("-", "-", dead, live),
        Db.column(
            "SELECT coalesce(locked_by, '-') FROM graphile_worker._private_jobs"
                + " WHERE id = ANY(?::bigint[]) ORDER BY id",
            pgArray(jobs)));
    assertEquals(runAtBefore, runAts(jobs), "no job was re-timed");
    assertEquals(
        Set.of(run),
        new HashSet<>(
            Db.column(
                "SELECT run_id FROM rollcall.ledger WHERE instance_id = ? AND outcome = 'lock-released'",
                victim.id())));
    assertEquals(
        2,
        Db.number(
            "SELECT count(*) FROM rollcall.ledger WHERE instance_id = ? AND outcome = 'lock-released'",
            victim.id()));
    Db.update(
        "DELETE FROM graphile_worker._private_jobs WHERE id = ANY(?::bigint[])", pgArray(jobs));
  }

  /** A PostgreSQL array literal of job ids. */
  static String pgArray(List<Long> ids) {
    return "{" + String.join(",", ids.stream().map(String::valueOf).toList()) + "}";
  }

  static String runAts(List<Long> jobs) {
    return String.join(
        ",",
        Db.column(
            "SELECT run_at::text FROM graphile_worker._private_jobs WHERE id = ANY(?::bigint[])"
                + " ORDER BY id",
            pgArray(jobs)));
  }
}
