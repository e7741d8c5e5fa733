package dev.rollcall.chaos;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.rollcall.testing.Api;
import dev.rollcall.testing.EngineFixture;
import dev.rollcall.testing.EngineMix;
import dev.rollcall.testing.NodeReplica;
import dev.rollcall.testing.RestartablePostgres;
import dev.rollcall.testing.ServiceProcess;
import dev.rollcall.testing.TcpBalancer;
import dev.rollcall.testing.TestDatabase;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * The chaos suite (issue 7): two packaged service replicas behind a TCP balancer and several Node
 * application processes running the real Rollcall client recover a deploy of the engine's runs
 * while processes are killed with SIGKILL and restarted, and while PostgreSQL itself is restarted;
 * afterwards every run that needed a re-drive got a job, duplicates are explained by expired
 * leases, every epoch is closed, and no existing engine job was touched.
 *
 * <p>Sizes: {@code -Dchaos.runs} (active runs, 10 000), {@code -Dchaos.injections} (kills, 10),
 * {@code -Dchaos.clients} (application processes, 4), {@code -Dchaos.seed} (the injection plan).
 */
@Tag("chaos")
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class ChaosIT {

  static final int RUNS = Integer.getInteger("chaos.runs", 10_000);
  static final int INJECTIONS = Integer.getInteger("chaos.injections", 10);
  static final int CLIENTS = Integer.getInteger("chaos.clients", 4);
  static final long SEED = Long.getLong("chaos.seed", System.nanoTime());

  static final String NAMESPACE = "chaos";
  static final String SECRET = "secret-" + NAMESPACE; // what Api.register presents

  /**
   * Each batch's enqueue is stretched by this much while the kills go on (half before the enqueue,
   * half between the enqueue and the complete), well inside the 3 s batch lease, so that kills land
   * inside batches on both sides of their enqueue. Once the kills are done the pause is lifted.
   */
  static final int CHAOS_PACE_MS = 1_000;

  /** The pause before each injection: 0.5 s to 2 s, 1.25 s on average. */
  static final int GAP_MIN_MS = 500;

  static final int GAP_SPREAD_MS = 1_500;

  static final long CLASS_STARTED = System.nanoTime();

  /** A progress line, so that a slow phase shows in the test's output. */
  static void log(String what, Object... args) {
    System.out.printf(
        "[chaos %6.1f s] %s%n",
        (System.nanoTime() - CLASS_STARTED) / 1e9, String.format(what, args));
  }

  static RestartablePostgres postgres;
  static TestDatabase db;
  static TcpBalancer balancer;
  static final ServiceProcess[] replicas = new ServiceProcess[2];
  static int replicaStarts;
  static volatile double replicaStartSeconds; // the slowest start so far

  @BeforeAll
  static void start() throws Exception {
    System.out.printf(
        "chaos: seed %d (-Dchaos.seed=%d repeats the injection plan), %d runs, %d injections,"
            + " %d clients%n",
        SEED, SEED, RUNS, INJECTIONS, CLIENTS);
    CompletableFuture<Void> npm = CompletableFuture.runAsync(NodeReplica::install);
    postgres = RestartablePostgres.create("chaos");
    db = postgres.database();
    EngineFixture.setUpSchemas(db);
    npm.join();
    balancer = new TcpBalancer();
    CompletableFuture<ServiceProcess> first = CompletableFuture.supplyAsync(() -> startReplica(0));
    replicas[1] = startReplica(1);
    replicas[0] = first.join();
    for (ServiceProcess r : replicas) {
      balancer.add(r.base());
    }
  }

  @AfterAll
  static void stop() throws Exception {
    Fleet.killAll();
    for (ServiceProcess r : replicas) {
      if (r != null) {
        r.close();
      }
    }
    if (balancer != null) {
      balancer.close();
    }
    if (postgres != null) {
      postgres.close();
    }
  }

  /** The service's settings: short timings, so that every loss comes back within seconds. */
  static Map<String, String> settings() {
    Map<String, String> s = new HashMap<>();
    String ns = "rollcall.namespaces.\"" + NAMESPACE + "\".";
    s.put(ns + "registration-secret", SECRET);
    s.put(ns + "source.kind", "world-postgres");
    s.put("quarkus.http.host", "127.0.0.1");
    s.put("quarkus.management.host", "127.0.0.1");
    s.put("rollcall.lease-ttl", "2s");
    s.put("rollcall.heartbeat-interval", "500ms");
    s.put("rollcall.batch.lease", "3s");
    s.put("rollcall.reaper-interval", "250ms");
    // This suite checks boot recovery; a sweep would be a second pass over the same runs.
    s.put("rollcall.sweep.interval", "off");
    // A batch may lose several holders in a row here (kills, a database restart); giving its runs
    // up after the default 5 hand-outs would be correct but is not what is tested.
    s.put("rollcall.batch.max-attempts", "50");
    return s;
  }

  static ServiceProcess startReplica(int slot) {
    String name;
    synchronized (ChaosIT.class) {
      name = "chaos-replica-" + slot + "-" + (++replicaStarts);
    }
    try {
      long t0 = System.nanoTime();
      ServiceProcess started = ServiceProcess.start(name, db, settings());
      replicaStartSeconds = Math.max(replicaStartSeconds, (System.nanoTime() - t0) / 1e9);
      return started;
    } catch (Exception e) {
      throw new IllegalStateException(name + " did not start", e);
    }
  }

  // ------------------------------------------------------------------------------------------
  // 1. Kill chaos

  @Test
  @Order(1)
  void killChaos() throws Exception {
    long started = System.nanoTime();
    Scenario scenario = Scenario.seed("kill");
    log("kill: seeded");
    // At the chaos pace the recovery must outlast the injections, even if every one of them were
    // a service restart (as slow as the slowest start so far); once they are done it runs at full
    // speed.
    double chaosSeconds =
        INJECTIONS * ((GAP_MIN_MS + GAP_SPREAD_MS / 2) / 1000.0 + replicaStartSeconds);
    Fleet fleet = new Fleet(scenario.deploy, batchSize(scenario.needing, 2 * chaosSeconds));
    fleet.startAll();
    long epoch = db.awaitBootPass(NAMESPACE, scenario.deploy, Duration.ofSeconds(60));
    awaitCompletedBatches(epoch, 2);
    log("kill: epoch %d under way, batches of %d; injecting", epoch, fleet.maxRuns);

    long chaosStarted = System.nanoTime();
    Random random = new Random(SEED);
    Map<String, Integer> injected = new LinkedHashMap<>();
    injected.put("client", 0);
    injected.put("replica", 0);
    int duringRecovery = 0;
    long chaosDeadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60L * INJECTIONS);
    for (int i = 0; i < INJECTIONS; i++) {
      assertTrue(System.nanoTime() < chaosDeadline, "injections took too long");
      Thread.sleep(GAP_MIN_MS + random.nextInt(GAP_SPREAD_MS));
      int target = random.nextInt(CLIENTS + replicas.length);
      boolean open = epochOpen(epoch);
      if (target < CLIENTS) {
        fleet.killAndRestart(target);
        injected.merge("client", 1, Integer::sum);
      } else {
        int slot = target - CLIENTS;
        // Out of the balancer first, as a terminating pod leaves its Service; then SIGKILL. The
        // other replica stays up: at most one is down at any time.
        ServiceProcess dead = replicas[slot];
        balancer.remove(dead.base());
        dead.kill();
        replicas[slot] = startReplica(slot);
        balancer.add(replicas[slot].base());
        injected.merge("replica", 1, Integer::sum);
      }
      duringRecovery += open ? 1 : 0;
      log(
          "kill: injection %d: %s",
          i + 1, target < CLIENTS ? "client " + target : "replica " + (target - CLIENTS));
    }
    // Every injection must have hit a recovery in progress, or it tested nothing.
    assertEquals(
        INJECTIONS,
        duringRecovery,
        "the recovery ended before the injections did; it is paced by the batch size");
    fleet.pace(0);
    long chaosEnded = System.nanoTime();

    awaitClosed(epoch);
    long closed = System.nanoTime();
    log("kill: epoch closed");
    fleet.awaitRecovered(epoch);
    log("kill: every client recovered");
    Outcome out = scenario.check(epoch);
    log("kill: invariants hold");
    fleet.leaveAll();
    log("kill: every client left");
    System.out.printf(
        "chaos kill: %d active runs (%d needing a re-drive), %d clients, batches of %d,"
            + " injections %s, all during the recovery; %d duplicate jobs (runs enqueued twice)"
            + " from %d expired batch leases; wall time %.1f s (injections %.1f s, then recovery"
            + " at full speed %.1f s); seed %d%n",
        RUNS,
        scenario.needing,
        CLIENTS,
        fleet.maxRuns,
        injected,
        out.duplicates,
        out.expiredBatches,
        (System.nanoTime() - started) / 1e9,
        (chaosEnded - chaosStarted) / 1e9,
        (closed - chaosEnded) / 1e9,
        SEED);
  }

  // ------------------------------------------------------------------------------------------
  // 2. PostgreSQL restarted mid-recovery

  @Test
  @Order(2)
  void postgresRestartedMidRecovery() throws Exception {
    long started = System.nanoTime();
    Scenario scenario = Scenario.seed("pg-restart");
    log("pg-restart: seeded");
    // At the chaos pace the recovery lasts about 15 s (claims are slower than a batch's enqueue,
    // so few large batches finish sooner than many small ones): the outage lands in its middle.
    Fleet fleet = new Fleet(scenario.deploy, batchSize(scenario.needing, 15));
    fleet.startAll();
    long epoch = db.awaitBootPass(NAMESPACE, scenario.deploy, Duration.ofSeconds(60));
    awaitCompletedBatches(epoch, 5);
    log("pg-restart: epoch %d under way, batches of %d; stopping PostgreSQL", epoch, fleet.maxRuns);
    // An instance of the same deploy that only probes the API during the outage.
    Api viaFirst = new Api(replicas[0].base());
    Api.Instance probe = viaFirst.register(NAMESPACE, scenario.deploy, "probe");

    assertTrue(epochOpen(epoch), "the recovery finished before the database could be stopped");
    long stopped = System.nanoTime();
    postgres.stop();
    List<Long> downMs = new ArrayList<>();
    for (ServiceProcess r : replicas) {
      downMs.add(awaitReadiness(r, 503, Duration.ofSeconds(5)) - stopped);
    }
    log(
        "pg-restart: both replicas not ready: %s ms after the stop",
        downMs.stream().map(ns -> ns / 1_000_000).toList());
    for (ServiceProcess r : replicas) {
      Api api = new Api(r.base());
      assertDatabaseUnavailable("heartbeat", api.heartbeat(probe));
      assertDatabaseUnavailable("claim", api.claim(probe, 10));
      assertDatabaseUnavailable(
          "register",
          api.post(
              "instances",
              SECRET,
              Map.of("namespace", NAMESPACE, "deploymentId", scenario.deploy, "name", "late")));
    }
    long outageMs = 4_000 - (System.nanoTime() - stopped) / 1_000_000;
    if (outageMs > 0) {
      Thread.sleep(outageMs);
    }
    log("pg-restart: starting PostgreSQL again");
    long restarted = System.nanoTime();
    postgres.start();
    List<Long> upMs = new ArrayList<>();
    for (ServiceProcess r : replicas) {
      upMs.add(awaitReadiness(r, 200, Duration.ofSeconds(30)) - restarted);
    }
    long outageTotalMs = (restarted - stopped) / 1_000_000;
    log("pg-restart: replicas ready again");
    fleet.pace(0);

    // The engine's processes do not survive a database restart: world-postgres 4.3.7 keeps a
    // LISTEN connection without an error listener, so PostgreSQL ending it is an unhandled
    // 'error' event and the process exits. A supervisor (Kubernetes) starts them again, with the
    // same deploymentId; so does this.
    awaitClosed(epoch, fleet::restartExited);
    log("pg-restart: epoch closed");
    fleet.awaitRecovered(epoch);
    log("pg-restart: every client recovered");
    Outcome out = scenario.check(epoch);
    log("pg-restart: invariants hold");
    fleet.leaveAll();
    log("pg-restart: every client left");
    System.out.printf(
        "chaos pg-restart: %d active runs (%d needing a re-drive), PostgreSQL down %d ms;"
            + " readiness DOWN after %s ms, UP again %s ms after the restart; %d client processes"
            + " exited with the database and were started again; %d duplicate jobs from %d"
            + " expired batch leases; wall time %.1f s%n",
        RUNS,
        scenario.needing,
        outageTotalMs,
        downMs.stream().map(ns -> String.valueOf(ns / 1_000_000)).toList(),
        upMs.stream().map(ns -> String.valueOf(ns / 1_000_000)).toList(),
        fleet.exitedOnTheirOwn,
        out.duplicates,
        out.expiredBatches,
        (System.nanoTime() - started) / 1e9);
  }

  static void assertDatabaseUnavailable(String what, Api.Reply reply) {
    assertEquals(503, reply.status(), what + " while the database is down: " + reply);
    assertTrue(
        reply.contentType().startsWith("application/problem+json"),
        what + ": " + reply.contentType());
    assertTrue(
        reply.text("type").endsWith("database-unavailable"), what + ": " + reply.text("type"));
  }

  /** Polls a replica's readiness until it answers {@code status}; returns when (nanoTime). */
  static long awaitReadiness(ServiceProcess replica, int status, Duration timeout)
      throws InterruptedException {
    Api management = new Api(replica.managementBase());
    long deadline = System.nanoTime() + timeout.toNanos();
    int last = -1;
    while (System.nanoTime() < deadline) {
      try {
        last = management.send("GET", "q/health/ready", null, null).status();
        if (last == status) {
          return System.nanoTime();
        }
      } catch (UncheckedIOException e) {
        last = 0;
      }
      Thread.sleep(50);
    }
    throw new AssertionError(
        "readiness of "
            + replica.base()
            + " did not answer "
            + status
            + " within "
            + timeout.toMillis()
            + " ms (last "
            + last
            + ")");
  }

  // ------------------------------------------------------------------------------------------
  // Runs, epochs and invariants

  /** Runs per claim for a recovery that lasts about {@code seconds} at the chaos pace. */
  static int batchSize(long needing, double seconds) {
    double batchesPerSecond = CLIENTS * 1000.0 / (CHAOS_PACE_MS + 100);
    return (int) Math.max(2, Math.min(5000, Math.ceil(needing / seconds / batchesPerSecond)));
  }

  static void awaitCompletedBatches(long epoch, int batches) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (completedBatches(epoch) < batches) {
      assertTrue(System.nanoTime() < deadline, "fewer than " + batches + " batches within 60 s");
      assertTrue(epochOpen(epoch), "the recovery finished before the chaos began");
      Thread.sleep(100);
    }
  }

  static long completedBatches(long epoch) {
    return Long.parseLong(
        db.column(
                "SELECT count(*) FROM rollcall.batches WHERE epoch_id = ? AND state = 'completed'",
                epoch)
            .get(0));
  }

  static boolean epochOpen(long epoch) {
    return db.column("SELECT state FROM rollcall.epochs WHERE id = ?", epoch)
        .equals(List.of("open"));
  }

  static void awaitClosed(long epoch) throws InterruptedException {
    awaitClosed(epoch, () -> {});
  }

  /** Waits for the epoch to close, running {@code tick} every 200 ms meanwhile. */
  static void awaitClosed(long epoch, Runnable tick) throws InterruptedException {
    long seconds = Math.max(120, RUNS / 200);
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
    while (epochOpen(epoch)) {
      assertTrue(System.nanoTime() < deadline, "epoch " + epoch + " still open after " + seconds);
      tick.run();
      Thread.sleep(200);
    }
  }

  /** Figures of a finished scenario. */
  record Outcome(long duplicates, long expiredBatches) {}

  /** One recovery: a fresh seed of the engine's runs and the deploy that recovers them. */
  static final class Scenario {
    final String deploy;
    final long needing;
    final long lastJobBefore;
    final List<String> jobsBefore;

    private Scenario(String deploy, long needing, long lastJobBefore, List<String> jobsBefore) {
      this.deploy = deploy;
      this.needing = needing;
      this.lastJobBefore = lastJobBefore;
      this.jobsBefore = jobsBefore;
    }

    static Scenario seed(String name) {
      EngineMix.seed(db, RUNS, 3, EngineMix.ALL);
      long last = EngineMix.lastJobId(db);
      return new Scenario(
          name + "-" + Long.toHexString(SEED),
          EngineMix.needing(db),
          last,
          EngineMix.jobsSnapshot(db, last));
    }

    /** The invariants of a finished recovery. */
    Outcome check(long epoch) {
      String newJobs =
          "(SELECT convert_from(decode(payload->>'data', 'base64'), 'UTF8')::json->>'runId'"
              + " AS run_id FROM graphile_worker._private_jobs WHERE id > "
              + lastJobBefore
              + " AND task_id = (SELECT id FROM graphile_worker._private_tasks"
              + " WHERE identifier = 'workflow_flows'))";
      String[] redriven =
          EngineMix.STATES.entrySet().stream()
              .filter(Map.Entry::getValue)
              .map(Map.Entry::getKey)
              .toArray(String[]::new);

      // Every run that needed a re-drive got at least one new job.
      List<String> missed =
          db.column(
              "WITH j AS MATERIALIZED "
                  + newJobs
                  + " SELECT r.id FROM workflow.workflow_runs r WHERE r.status IN ('pending',"
                  + " 'running') AND r.execution_context->>'seeded' = ANY(?)"
                  + " AND NOT EXISTS (SELECT 1 FROM j WHERE j.run_id = r.id)"
                  // ... or its own job, held by a dead worker, was released and runs again.
                  + " AND NOT EXISTS (SELECT 1 FROM rollcall.ledger l WHERE l.namespace = ?"
                  + "   AND l.run_id = r.id AND l.outcome = 'lock-released')"
                  + " ORDER BY r.id LIMIT 20",
              (Object) redriven,
              NAMESPACE);
      assertEquals(List.of(), missed, "runs that needed a re-drive and got no job (first 20)");

      // Runs that needed none (a future wait with its wake job) and terminal runs got no job.
      Map<String, long[]> added = EngineMix.addedByState(db, lastJobBefore);
      for (var e : EngineMix.STATES.entrySet()) {
        if (!e.getValue()) {
          assertEquals(
              0, added.getOrDefault(e.getKey(), new long[2])[0], "new jobs for " + e.getKey());
        }
      }
      assertEquals(
          0,
          added.getOrDefault("not an active run", new long[2])[0],
          "new jobs for terminal runs or for no run at all");

      // A run with more than one new job was in a batch whose lease expired in this epoch.
      List<String> unexplained =
          db.column(
              "SELECT j.run_id FROM "
                  + newJobs
                  + " j GROUP BY j.run_id HAVING count(*) > 1 AND NOT EXISTS (SELECT 1 FROM"
                  + " rollcall.ledger l WHERE l.namespace = ? AND l.epoch_id = ?"
                  + " AND l.run_id = j.run_id AND l.outcome = 'lease-expired')"
                  + " ORDER BY 1 LIMIT 20",
              NAMESPACE,
              epoch);
      assertEquals(List.of(), unexplained, "runs enqueued twice without an expired lease");
      long duplicates =
          Long.parseLong(
              db.column("SELECT count(*) - count(DISTINCT run_id) FROM " + newJobs + " j").get(0));
      long expiredBatches =
          Long.parseLong(
              db.column(
                      "SELECT count(DISTINCT (batch_id, fence)) FROM rollcall.ledger"
                          + " WHERE epoch_id = ? AND outcome = 'lease-expired'",
                      epoch)
                  .get(0));

      // Every epoch of the namespace is closed, the boot pass by completing.
      assertEquals(
          List.of("completed"),
          db.column("SELECT close_reason FROM rollcall.epochs WHERE id = ?", epoch));
      assertEquals(
          List.of(),
          db.column(
              "SELECT kind || ' ' || id FROM rollcall.epochs WHERE namespace = ?"
                  + " AND state = 'open'",
              NAMESPACE),
          "open epochs");

      // No engine job that existed before was deleted, re-timed or otherwise changed, but for
      // the locks of dead workers that Rollcall released, each with its ledger row.
      Set<String> released =
          new HashSet<>(
              db.column(
                  "SELECT substring(detail FROM '^released job ([0-9]+) ') FROM rollcall.ledger"
                      + " WHERE namespace = ? AND outcome = 'lock-released'",
                  NAMESPACE));
      List<String> expectedJobs =
          jobsBefore.stream()
              .map(
                  row ->
                      released.contains(row.substring(0, row.indexOf(' ')))
                          ? row.replace(" worker-dead-bench ", " ")
                          : row)
              .toList();
      assertEquals(
          expectedJobs, EngineMix.jobsSnapshot(db, lastJobBefore), "the queue's existing jobs");
      return new Outcome(duplicates, expiredBatches);
    }
  }

  // ------------------------------------------------------------------------------------------
  // The application processes

  /** The Node application processes of one deploy, one per slot, all behind the balancer. */
  static final class Fleet {
    private static final List<NodeReplica> everyProcess = new ArrayList<>();

    final String deploy;
    final int maxRuns;
    final NodeReplica[] slots = new NodeReplica[CLIENTS];
    volatile int paceMs = CHAOS_PACE_MS;
    int starts;
    int exitedOnTheirOwn;

    Fleet(String deploy, int maxRuns) {
      this.deploy = deploy;
      this.maxRuns = maxRuns;
    }

    synchronized void startAll() {
      for (int i = 0; i < CLIENTS; i++) {
        slots[i] = start(i);
      }
    }

    private NodeReplica start(int slot) {
      Map<String, Object> config = new LinkedHashMap<>();
      config.put("mode", "rollcall");
      config.put("url", balancer.url().toString());
      config.put("namespace", NAMESPACE);
      config.put("secret", SECRET);
      config.put("deploymentId", deploy);
      config.put("maxRuns", maxRuns);
      config.put("stayAlive", true);
      config.put("enqueueDelayMs", paceMs);
      String name = deploy + "-c" + slot + "-" + (++starts);
      NodeReplica p = NodeReplica.start(name, db, config);
      synchronized (everyProcess) {
        everyProcess.add(p);
      }
      return p;
    }

    synchronized void killAndRestart(int slot) throws InterruptedException {
      slots[slot].kill();
      slots[slot] = start(slot);
    }

    /** Starts again every process that exited on its own; returns how many did so far. */
    synchronized void restartExited() {
      for (int i = 0; i < slots.length; i++) {
        if (!slots[i].isAlive()) {
          exitedOnTheirOwn++;
          slots[i] = start(i);
        }
      }
    }

    synchronized void pace(int ms) {
      paceMs = ms;
      for (NodeReplica p : slots) {
        try {
          p.send("pace " + ms);
        } catch (UncheckedIOException ended) {
          // awaitRecovered reports it
        }
      }
    }

    /** Every current process reports that its recovery ended with this epoch done. */
    synchronized void awaitRecovered(long epoch) throws InterruptedException {
      for (NodeReplica p : slots) {
        JsonNode recovered = p.await("recovered", Duration.ofSeconds(60));
        JsonNode outcome = recovered.path("outcome");
        assertEquals("done", outcome.path("status").asText(), p.name() + ": " + recovered);
        assertEquals(epoch, outcome.path("epochId").asLong(), p.name() + ": " + recovered);
      }
    }

    synchronized void leaveAll() throws InterruptedException {
      for (NodeReplica p : slots) {
        p.send("leave");
      }
      for (NodeReplica p : slots) {
        p.await("result", Duration.ofSeconds(30));
        p.waitFor(Duration.ofSeconds(30));
      }
    }

    static void killAll() throws InterruptedException {
      synchronized (everyProcess) {
        for (NodeReplica p : everyProcess) {
          p.close();
        }
      }
    }
  }
}
