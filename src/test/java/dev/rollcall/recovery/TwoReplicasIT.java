package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.testing.Api;
import dev.rollcall.testing.ClaimerSwarm;
import dev.rollcall.testing.ClaimerSwarm.Claimer;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.EngineFixture;
import dev.rollcall.testing.Poll;
import dev.rollcall.testing.ServiceProcess;
import dev.rollcall.testing.SourceTables;
import dev.rollcall.testing.TestDatabase;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * Two packaged service processes on one database behave exactly like one, and a replica killed in
 * the middle of an epoch loses nothing: its clients carry on through the other replica.
 */
@Tag("slow")
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class TwoReplicasIT {

  static final int CLAIMERS = 16;

  static TestDatabase db;
  static ServiceProcess a;
  static ServiceProcess b;

  @BeforeAll
  static void start() throws Exception {
    db = TestDatabase.start();
    Db.bind(db);
    SourceTables.create(db);
    EngineFixture.setUpSchemas(db);
    Map<String, String> settings = new HashMap<>(SourceTables.namespaceSettings());
    // A short batch lease, so that batches lost with a killed replica come back within seconds.
    // Everything else, lease TTL and reaper included, keeps its default.
    settings.put("rollcall.batch.lease", "3s");
    CompletableFuture<ServiceProcess> first =
        CompletableFuture.supplyAsync(() -> startReplica("replica-a", settings));
    b = startReplica("replica-b", settings);
    a = first.join();
  }

  static ServiceProcess startReplica(String name, Map<String, String> settings) {
    try {
      return ServiceProcess.start(name, db, settings);
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  @AfterAll
  static void stop() throws Exception {
    for (AutoCloseable c : new AutoCloseable[] {a, b, db}) {
      if (c != null) {
        c.close();
      }
    }
  }

  @Test
  @Order(1)
  void claimersSpreadOverTwoReplicasShareOneEpochAndHandOutEveryRunOnce() throws Exception {
    Api viaA = new Api(a.base());
    Api viaB = new Api(b.base());
    String deploy = UUID.randomUUID().toString();
    List<Claimer> claimers = new ArrayList<>();
    for (int i = 0; i < CLAIMERS; i++) {
      Api api = i % 2 == 0 ? viaA : viaB;
      claimers.add(new Claimer(api, api.register(SourceTables.LARGE, deploy, "c" + i)));
    }

    ClaimerSwarm.Outcome out = ClaimerSwarm.run(claimers, 250);

    EpochInvariants.check(deploy, SourceTables.LARGE, out);
    System.out.printf(
        "two replicas, %d claimers, %d runs: %d batches, hand-outs per run %.2f, %d ms%n",
        CLAIMERS,
        out.handedOut().size(),
        out.batches(),
        EpochInvariants.handOutsPerRun(out.epochs().iterator().next()),
        out.wallMillis());
  }

  @Test
  @Order(2)
  void aClaimHeldOnOneReplicaIsWokenByALeaveOnTheOtherAndByTheEpochClosing() throws Exception {
    Api viaA = new Api(a.base());
    Api viaB = new Api(b.base());
    String deploy = UUID.randomUUID().toString();
    Api.Instance peer = viaA.register(SourceTables.SMALL, deploy, "peer");
    Api.Instance leaver = viaB.register(SourceTables.SMALL, deploy, "leaver");
    // The deploy's pass: the leaver holds the only batch; the peer's held claim waits for it.
    Api.Batch all = viaB.claimBatch(leaver, 1000);
    CompletableFuture<Api.Reply> held =
        CompletableFuture.supplyAsync(() -> viaA.claimHeld(peer, 1000, 20_000, false));
    awaitHeldOn(a, SourceTables.SMALL);
    assertTrue(
        !held.isDone(), () -> "the claim is held while the leaver holds the batch: " + early(held));
    long t0 = System.nanoTime();
    viaB.complete(leaver, all, List.of()).expect(200);
    Api.Reply done = held.get(20, java.util.concurrent.TimeUnit.SECONDS).expect(200);
    long closedMs = (System.nanoTime() - t0) / 1_000_000;
    assertEquals("done", done.text("status"));
    assertTrue(closedMs < 1000, "woken by the epoch closing on the other replica: " + closedMs);

    // Idle: the peer's next claim waits for work; the leaver leaves (via B) with runs in flight.
    List<String> inFlight = all.runIds().subList(0, 3);
    viaB.heartbeat(leaver, inFlight).expect(200);
    CompletableFuture<Api.Reply> idle =
        CompletableFuture.supplyAsync(() -> viaA.claimHeld(peer, 1000, 20_000, true));
    awaitHeldOn(a, SourceTables.SMALL);
    assertTrue(
        !idle.isDone(), () -> "an idle claim is held while there is no work: " + early(idle));
    long t1 = System.nanoTime();
    viaB.leave(leaver, inFlight).expect(204);
    Api.Reply takeover = idle.get(20, java.util.concurrent.TimeUnit.SECONDS).expect(200);
    long takenMs = (System.nanoTime() - t1) / 1_000_000;
    assertEquals("batch", takeover.text("status"));
    assertEquals("takeover", takeover.body().get("batch").get("epochKind").asText());
    assertEquals(
        java.util.Set.copyOf(inFlight),
        java.util.Set.copyOf(Api.batch(takeover.body().get("batch")).runIds()));
    assertTrue(takenMs < 1000, "woken by the leave on the other replica: " + takenMs);
    System.out.printf(
        "held claims across replicas: woken %d ms after the epoch closed, %d ms after a leave%n",
        closedMs, takenMs);
  }

  @Test
  @Order(3)
  void aCrashedInstanceIsTakenOverOnceWithinTheLeaseTtlAndAReaperIntervalWhileBothReplicasReap()
      throws Exception {
    Api viaA = new Api(a.base());
    Api viaB = new Api(b.base());
    String deploy = UUID.randomUUID().toString();
    Api.Instance victim = viaA.register(SourceTables.LARGE, deploy, "victim");
    List<String> inFlight = List.of("wrun_0000000001", "wrun_0000000002", "wrun_0000000003");
    viaA.heartbeat(victim, inFlight).expect(200);
    long lastHeartbeat = System.nanoTime();
    // The victim now crashes: no more heartbeats.

    long deadline = lastHeartbeat + java.util.concurrent.TimeUnit.SECONDS.toNanos(30);
    while (Db.number(
                "SELECT count(*) FROM rollcall.epochs WHERE subject_instance_id = ?", victim.id())
            == 0
        && System.nanoTime() < deadline) {
      Thread.sleep(50);
    }
    long detectedMs = (System.nanoTime() - lastHeartbeat) / 1_000_000;

    assertEquals(
        1,
        Db.number(
            "SELECT count(*) FROM rollcall.epochs WHERE kind = 'takeover'"
                + " AND subject_instance_id = ?",
            victim.id()));
    // Lease TTL 10 s + reaper interval 1 s, with slack for a loaded machine.
    assertTrue(
        detectedMs <= 13_000, "takeover opened " + detectedMs + " ms after the last heartbeat");
    Api.Instance peer = viaB.register(SourceTables.LARGE, deploy, "peer");
    Api.Batch taken = viaB.claimBatch(peer, 100);
    assertEquals("takeover", taken.json().get("epochKind").asText());
    assertEquals(java.util.Set.copyOf(inFlight), java.util.Set.copyOf(taken.runIds()));
    viaB.complete(peer, taken, List.of()).expect(200);
    viaA.heartbeat(victim).expect(410);
    System.out.printf(
        "crash takeover: opened %d ms after the victim's last heartbeat (lease TTL 10 s)%n",
        detectedMs);
  }

  @Test
  @Order(4)
  void aReplicaKilledMidEpochLosesNothing() throws Exception {
    String deploy = UUID.randomUUID().toString();
    List<Claimer> claimers = new ArrayList<>();
    for (int i = 0; i < CLAIMERS; i++) {
      // Each claimer prefers one replica and fails over to the other, like a load balancer.
      Api api = new Api(i % 2 == 0 ? List.of(a.base(), b.base()) : List.of(b.base(), a.base()));
      claimers.add(new Claimer(api, api.register(SourceTables.LARGE, deploy, "k" + i)));
    }
    CompletableFuture<ClaimerSwarm.Outcome> swarm =
        CompletableFuture.supplyAsync(
            () -> {
              try {
                return ClaimerSwarm.run(claimers, 100);
              } catch (Exception e) {
                throw new IllegalStateException(e);
              }
            });
    // Kill replica A once the epoch is under way.
    Poll.until(
        "ten batches of the epoch are cut before replica A is killed",
        Duration.ofSeconds(60),
        () ->
            Db.number(
                    "SELECT count(*) FROM rollcall.batches b"
                        + " JOIN rollcall.epochs e ON e.id = b.epoch_id WHERE e.deployment_id = ?",
                    deploy)
                >= 10);
    a.kill();

    ClaimerSwarm.Outcome out = swarm.join();

    long epoch = out.epochs().iterator().next();
    assertEquals(1, out.epochs().size());
    assertEquals(Db.activeRuns(SourceTables.LARGE), out.handedOut(), "no run lost");
    assertEquals(
        "closed", Db.column("SELECT state FROM rollcall.epochs WHERE id = ?", epoch).get(0));
    // A run handed out more than once must have lost a lease in between.
    List<String> unexplained =
        Db.column(
            "SELECT run_id FROM rollcall.ledger WHERE epoch_id = ? GROUP BY run_id"
                + " HAVING count(*) > 1 AND count(*) FILTER (WHERE outcome = 'lease-expired') = 0",
            epoch);
    assertEquals(List.of(), unexplained);
    long duplicates =
        Db.number(
            "SELECT count(*) - count(DISTINCT run_id) FROM rollcall.ledger WHERE epoch_id = ?",
            epoch);
    assertTrue(duplicates <= 100L * CLAIMERS, "only batches in flight at the kill: " + duplicates);
    System.out.printf(
        "replica killed mid-epoch: %d runs recovered, %d extra hand-outs from expired leases, %d ms%n",
        out.handedOut().size(), duplicates, out.wallMillis());
  }

  /** What a claim that should still be held answered: for the failure message. */
  /**
   * Waits until the replica holds a claim of the namespace in its waiting room, as its gauge {@code
   * rollcall.claims.held} shows: the claim was answered neither at once nor yet.
   */
  private static void awaitHeldOn(ServiceProcess replica, String namespace) {
    String held = "rollcall_claims_held{namespace=\"" + namespace + "\"}";
    Poll.until(
        "a claim of namespace " + namespace + " is held on " + replica.base(),
        java.time.Duration.ofSeconds(20),
        () ->
            replica.metrics("rollcall_claims_held", List.of("namespace")).getOrDefault(held, 0.0)
                >= 1);
  }

  private static String early(CompletableFuture<Api.Reply> claim) {
    try {
      Api.Reply r = claim.getNow(null);
      return r == null ? "(nothing)" : r.status() + " " + r.body();
    } catch (RuntimeException e) {
      return e.toString();
    }
  }
}
