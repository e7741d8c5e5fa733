package dev.rollcall.upgrade;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.testing.ServiceProcess;
import dev.rollcall.testing.SourceTables;
import dev.rollcall.testing.TcpBalancer;
import dev.rollcall.testing.TestDatabase;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * A rolling upgrade under load (issue 57, scenario 2): two service replicas of the previous release
 * (built from its commit by {@link PreviousRelease}) serve a fleet of heartbeating instances and a
 * deploy's boot pass; a replica of this build joins them and migrates the schema past what the old
 * jar knows; instances holding runs die or leave (takeovers); an old replica is restarted on the
 * migrated schema; then the old replicas are replaced one by one by new ones, as a rolling update
 * does. Asserted: no client-visible error but 5xx answers and refused or reset connections that a
 * retry got past; the pass and every takeover closed; no run handed out twice (the ledger has no
 * run with two hand-outs but where one's lease expired).
 *
 * <p>Sizes: {@code -Dupgrade.instances} (heartbeating instances, 200; 1 000 is the full size),
 * {@code -Dupgrade.runs} (the pass's active runs, 2 000), {@code -Dupgrade.claimers} (6), {@code
 * -Dupgrade.victims} (instances taken over, 4, half by a lapsed lease and half by a leave), {@code
 * -Dupgrade.victim-runs} (each victim's in-flight runs, 25), {@code -Dupgrade.batch} (runs per
 * claim; by default as small as lets the pass outlast the roll), {@code -Dupgrade.lease-ttl} (30s).
 * {@code -Dupgrade.previous} names the release to upgrade from (see {@link PreviousRelease}).
 * Tagged {@code upgrade}; part of {@code ./mvnw -B verify}, alone with {@code -Dit.test=UpgradeIT}.
 */
@Tag("upgrade")
class UpgradeIT {

  static final String NAMESPACE = SourceTables.BENCH;
  static final long PACE_MS = 1_000;
  static final String LEASE_TTL = System.getProperty("upgrade.lease-ttl", "30s");
  static final long CLASS_STARTED = System.nanoTime();

  static void log(String what, Object... args) {
    System.out.printf(
        "[upgrade %6.1f s] %s%n",
        (System.nanoTime() - CLASS_STARTED) / 1e9, String.format(what, args));
  }

  final int instances = Integer.getInteger("upgrade.instances", 200);
  final int runs = Integer.getInteger("upgrade.runs", 2_000);
  final int claimerCount = Integer.getInteger("upgrade.claimers", 6);
  final int victimCount = Integer.getInteger("upgrade.victims", 4);
  final int victimRuns = Integer.getInteger("upgrade.victim-runs", 25);

  final Requests requests = new Requests();
  final Map<String, ServiceProcess> replicas = new LinkedHashMap<>();
  final Map<String, Integer> startSeconds = new LinkedHashMap<>();
  TestDatabase db;
  TcpBalancer balancer;

  @Test
  void previousAndNewReleaseSideBySideUnderLoad() throws Exception {
    long t0 = System.nanoTime();
    PreviousRelease previous = PreviousRelease.build();
    Path current = Path.of(System.getProperty("rollcall.app.dir", "target/quarkus-app"));
    int currentNewest = PreviousRelease.newestMigration(Path.of(PreviousRelease.MIGRATIONS));
    log(
        "previous release %s (migrations to V%d; %s in %.0f s); this build migrates to V%d",
        previous.commit,
        previous.newestMigration,
        previous.builtNow ? "built" : "built by an earlier run",
        previous.buildSeconds,
        currentNewest);
    assertTrue(
        currentNewest > previous.newestMigration,
        "the previous release knows every migration of this build: the upgrade tests no schema"
            + " change (choose an older -Dupgrade.previous)");
    try (TestDatabase database = TestDatabase.start();
        TcpBalancer lb = new TcpBalancer()) {
      db = database;
      balancer = lb;
      try {
        run(previous, current, t0);
      } finally {
        for (ServiceProcess p : replicas.values()) {
          p.close();
        }
      }
    }
  }

  private void run(PreviousRelease previous, Path current, long t0) throws Exception {
    SourceTables.create(db);
    SourceTables.insertRuns(db, NAMESPACE, 1, runs, runs / 5);
    List<String> active =
        db.column(
            "SELECT id FROM "
                + SourceTables.table(NAMESPACE)
                + " WHERE status IN ('pending', 'running') ORDER BY id");
    Map<String, String> newSettings = settings();
    Map<String, String> oldSettings = settings();
    if (!previous.ignoresFutureMigrations) {
      // As docs/operations.md tells operators upgrading from a release before the setting.
      oldSettings.put("quarkus.flyway.ignore-future-migrations", "true");
      log(
          "the previous release does not ship %s: its replicas are given it",
          PreviousRelease.IGNORE_FUTURE);
    }
    CompletableFuture<Void> other =
        CompletableFuture.runAsync(() -> start("old-1", previous.app, oldSettings));
    start("old-2", previous.app, oldSettings);
    other.join();
    assertEquals(previous.newestMigration, schemaVersion(), "the schema the old replicas made");
    log("two replicas of %s up, schema at V%d", previous.commit, schemaVersion());

    try (Fleet fleet =
        new Fleet(balancer.url(), NAMESPACE, requests, 3_000, Math.max(8, instances / 16))) {
      registerFleet(fleet);
      log("%d instances heartbeating", fleet.beating());
      List<Fleet.Member> victims = new ArrayList<>();
      for (int v = 0; v < victimCount; v++) {
        victims.add(
            fleet.join(
                "victims",
                "victim-" + v,
                active.subList(v * victimRuns, Math.min(active.size(), (v + 1) * victimRuns))));
      }
      String deploy = "upgrade-" + UUID.randomUUID();
      long[] batchAndPace = batchAndPace();
      int batch = (int) batchAndPace[0];
      Claimers claimers =
          new Claimers(requests, batch, batchAndPace[1], () -> !everyEpochClosed(deploy));
      for (int c = 0; c < claimerCount; c++) {
        claimers.start(balancer.url(), fleet, fleet.join(deploy, "claimer-" + c, List.of()));
      }
      long pass = db.awaitBootPass(NAMESPACE, deploy, Duration.ofSeconds(120));
      log(
          "boot pass %d under way on the old replicas, batches of %d, %d ms each",
          pass, batch, batchAndPace[1]);

      List<String> duringThePass = new ArrayList<>();
      long rollStarted = System.nanoTime();
      step(pass, duringThePass, "new-1 migrates", () -> start("new-1", current, newSettings));
      assertTrue(schemaVersion() > previous.newestMigration, "new-1 did not migrate the schema");
      log("schema at V%d beside replicas that know V%d", schemaVersion(), previous.newestMigration);
      step(
          pass,
          duringThePass,
          "victims die or leave",
          () -> {
            for (int v = 0; v < victims.size(); v++) {
              if (v % 2 == 0) {
                fleet.silence(victims.get(v));
              } else {
                fleet.leave(victims.get(v));
              }
            }
          });
      step(
          pass,
          duringThePass,
          "old-2 restarted on the new schema",
          () -> {
            stop("old-2");
            start("old-2b", previous.app, oldSettings);
          });
      step(
          pass,
          duringThePass,
          "old-1 replaced by new-2",
          () -> {
            stop("old-1");
            start("new-2", current, newSettings);
          });
      step(
          pass,
          duringThePass,
          "old-2b replaced by new-3",
          () -> {
            stop("old-2b");
            start("new-3", current, newSettings);
          });
      double rollSeconds = (System.nanoTime() - rollStarted) / 1e9;
      claimers.pace = 0;
      log("roll done in %.1f s; the rest of the pass at full speed", rollSeconds);
      claimers.awaitDone(Math.max(300, runs / 10));
      long closedAt = System.nanoTime();
      log("pass and takeovers closed; the fleet beats on until the checks are done");

      Outcome out = check(deploy, victims, active, claimers);
      // This build in turn must start on a schema a later release has expanded: the same setting,
      // shipped in its application.properties, not given here.
      int known = schemaVersion();
      db.execute(
          "INSERT INTO rollcall.flyway_schema_history (installed_rank, version, description, type,"
              + " script, checksum, installed_by, execution_time, success)"
              + " SELECT max(installed_rank) + 1, '"
              + (known + 1)
              + "', 'a later release', 'SQL',"
              + " 'V"
              + (known + 1)
              + "__a_later_release.sql', 0, current_user, 0, true"
              + " FROM rollcall.flyway_schema_history");
      start("new-4", current, newSettings);
      log("new-4 (this build) started on a schema one migration ahead of it (V%d)", known + 1);
      assertEquals(
          List.of(
              "new-1 migrates",
              "victims die or leave",
              "old-2 restarted on the new schema",
              "old-1 replaced by new-2",
              "old-2b replaced by new-3"),
          duringThePass,
          "every step of the roll must happen while the pass is open, or it tested nothing");
      System.out.printf(
          "%nupgrade: from %s (V%d) to this build (V%d); %d instances heartbeating every 3 s,"
              + " %d claimers in batches of %d, %d victims with %d runs each%n"
              + "  requests %d (sent %d with retries); retried by kind %s%n"
              + "  client-visible errors %d: %s%n"
              + "  boot pass: %d active runs, %d batches (%d of takeovers); hand-outs in the"
              + " ledger %d, of which lease-expired %d; runs handed out twice outside an expired"
              + " lease %d%n"
              + "  takeovers %d, all closed; replica starts (s) %s%n"
              + "  previous jar %s %.0f s; roll %.1f s; closed %.1f s after the roll; wall %.1f s%n%n",
          previous.commit.substring(0, 10),
          previous.newestMigration,
          known,
          instances,
          claimerCount,
          batch,
          victimCount,
          victimRuns,
          requests.requests(),
          requests.sent(),
          requests.retriedByKind(),
          requests.errors(),
          requests.errorsByKind(),
          active.size(),
          claimers.batches.get(),
          claimers.takeoverBatches.get(),
          out.handOuts,
          out.expired,
          out.twice.size(),
          out.takeovers,
          startSeconds,
          previous.builtNow ? "built in" : "cached, looked up in",
          previous.buildSeconds,
          rollSeconds,
          (closedAt - rollStarted) / 1e9 - rollSeconds,
          (System.nanoTime() - t0) / 1e9);
      assertEquals(List.of(), out.twice, "runs handed out twice outside an expired lease");
      assertEquals(Map.of(), requests.errorsByKind(), "client-visible errors");
    }
  }

  private void registerFleet(Fleet fleet) throws Exception {
    ExecutorService registrars = Executors.newFixedThreadPool(8);
    List<Future<?>> joined = new ArrayList<>();
    for (int i = 0; i < instances; i++) {
      int me = i;
      joined.add(registrars.submit(() -> fleet.join("fleet", "fleet-" + me, List.of())));
    }
    for (Future<?> f : joined) {
      f.get(5, TimeUnit.MINUTES);
    }
    registrars.shutdown();
  }

  /** A step of the roll, noted if the pass was still open when it ended. */
  private void step(long pass, List<String> during, String what, Step step) throws Exception {
    log("%s ...", what);
    step.run();
    if (open(pass)) {
      during.add(what);
    }
    log("%s: done (pass %s)", what, open(pass) ? "open" : "closed");
  }

  interface Step {
    void run() throws Exception;
  }

  /**
   * Runs per claim and the pause per batch that let the pass outlast the roll: five replica starts,
   * each as slow as the slowest start so far, and as much again. Batches of one run at {@link
   * #PACE_MS} are not always slow enough on a starved machine: then the pause grows.
   */
  private long[] batchAndPace() {
    int slowest = startSeconds.values().stream().mapToInt(Integer::intValue).max().orElse(30);
    double passSeconds = 2.0 * 5 * (slowest + 5);
    long perBatchMs = PACE_MS + 150; // the pause, and about as long again for claim and complete
    long batch =
        Integer.getInteger(
            "upgrade.batch",
            (int)
                Math.max(
                    1,
                    Math.min(
                        500, Math.floor(runs * perBatchMs / (claimerCount * passSeconds * 1000)))));
    long pace =
        Math.max(PACE_MS, (long) Math.ceil(passSeconds * claimerCount * batch * 1000 / runs) - 150);
    return new long[] {batch, pace};
  }

  private Map<String, String> settings() {
    Map<String, String> s = new HashMap<>();
    String ns = "rollcall.namespaces.\"" + NAMESPACE + "\".";
    SourceTables.namespaceSettings()
        .forEach(
            (k, v) -> {
              if (k.startsWith(ns)) {
                s.put(k, v);
              }
            });
    s.put("quarkus.http.host", "127.0.0.1");
    s.put("quarkus.management.host", "127.0.0.1");
    // Boot passes and takeovers only: a sweep would be a third pass over the same runs.
    s.put("rollcall.sweep.interval", "off");
    // Beats every 3 s as by default, leases three times the default: on two shared cores with
    // three service replicas starting and stopping, beats of a thousand instances can be late by
    // more than the default 10 s, and this test is about the upgrade, not about detection (a
    // false death would still count as a client-visible error).
    s.put("rollcall.lease-ttl", LEASE_TTL);
    return s;
  }

  private void start(String name, Path app, Map<String, String> settings) {
    long t0 = System.nanoTime();
    try {
      ServiceProcess p =
          ServiceProcess.start("upgrade-" + name, db, settings, Duration.ofSeconds(180), app);
      synchronized (replicas) {
        replicas.put(name, p);
        startSeconds.put(name, (int) Math.round((System.nanoTime() - t0) / 1e9));
      }
      balancer.add(p.base());
    } catch (Exception e) {
      throw new IllegalStateException(
          name + " (" + app + ") did not start: see target/it-logs/upgrade-" + name + ".log", e);
    }
  }

  /** Out of the balancer first, as a terminating pod leaves its Service; then SIGTERM. */
  private void stop(String name) throws InterruptedException {
    ServiceProcess p;
    synchronized (replicas) {
      p = replicas.remove(name);
    }
    balancer.remove(p.base());
    p.close();
  }

  private int schemaVersion() {
    return Integer.parseInt(
        db.column("SELECT max(version::int) FROM rollcall.flyway_schema_history WHERE success")
            .get(0));
  }

  private boolean open(long epoch) {
    return db.column("SELECT state FROM rollcall.epochs WHERE id = ?", epoch)
        .equals(List.of("open"));
  }

  /** The deploy's pass and a takeover of every victim exist, and every epoch is closed. */
  private boolean everyEpochClosed(String deploy) {
    List<String> counts =
        db.rows(
                "SELECT count(*) FILTER (WHERE kind = 'boot' AND deployment_id = ?),"
                    + " count(*) FILTER (WHERE kind = 'takeover'),"
                    + " count(*) FILTER (WHERE state = 'open')"
                    + " FROM rollcall.epochs WHERE namespace = ?",
                deploy,
                NAMESPACE)
            .get(0);
    return counts.get(0).equals("1")
        && Integer.parseInt(counts.get(1)) >= victimCount
        && counts.get(2).equals("0");
  }

  record Outcome(long handOuts, long expired, long takeovers, List<String> twice) {}

  private Outcome check(
      String deploy, List<Fleet.Member> victims, List<String> active, Claimers claimers) {
    // The pass closed by completing, and every victim's takeover closed.
    assertEquals(
        List.of("closed completed"),
        db.column(
            "SELECT state || ' ' || close_reason FROM rollcall.epochs WHERE namespace = ?"
                + " AND kind = 'boot' AND deployment_id = ?",
            NAMESPACE,
            deploy),
        "the deploy's boot pass");
    for (Fleet.Member v : victims) {
      assertEquals(
          List.of("closed"),
          db.column(
              "SELECT state FROM rollcall.epochs WHERE kind = 'takeover'"
                  + " AND subject_instance_id = ?::uuid",
              v.instance().id().toString()),
          "the takeover of " + v.instance().id());
    }
    assertEquals(
        List.of(),
        db.column(
            "SELECT kind || ' ' || id FROM rollcall.epochs WHERE namespace = ? AND state = 'open'",
            NAMESPACE),
        "epochs still open");
    // Every active run was handed out (by the pass, or by a takeover for a victim's runs).
    List<String> missed =
        db.column(
            "SELECT r.id FROM "
                + SourceTables.table(NAMESPACE)
                + " r"
                + " WHERE r.status IN ('pending', 'running') AND NOT EXISTS (SELECT 1 FROM"
                + " rollcall.ledger l WHERE l.namespace = ? AND l.run_id = r.id"
                + " AND l.outcome IN ('enqueued', 'failed')) ORDER BY 1 LIMIT 20",
            NAMESPACE);
    assertEquals(List.of(), missed, "active runs never handed out (first 20)");
    // A run handed out twice: two hand-outs that did not end in an expired lease, or two that
    // the claimers were given where the ledger shows no expired lease.
    List<String> twice =
        db.column(
            "SELECT l.run_id || ' (' || string_agg(e.kind || ' ' || e.id || ': ' || l.outcome,"
                + " ', ' ORDER BY l.id) || ')' FROM rollcall.ledger l"
                + " JOIN rollcall.epochs e ON e.id = l.epoch_id WHERE l.namespace = ?"
                + " GROUP BY l.run_id HAVING count(*) FILTER (WHERE l.outcome IN ('leased',"
                + " 'enqueued', 'failed')) > 1 ORDER BY 1 LIMIT 20",
            NAMESPACE);
    List<String> unexplained = new ArrayList<>(twice);
    claimers.handedOut.forEach(
        (run, n) -> {
          if (n > 1
              && unexplained.stream().noneMatch(u -> u.startsWith(run + " "))
              && db.column(
                      "SELECT 1 FROM rollcall.ledger WHERE namespace = ? AND run_id = ?"
                          + " AND outcome = 'lease-expired'",
                      NAMESPACE,
                      run)
                  .isEmpty()) {
            unexplained.add(run);
          }
        });
    List<String> counts =
        db.rows(
                "SELECT count(*) FILTER (WHERE outcome IN ('leased', 'enqueued', 'failed',"
                    + " 'lease-expired')), count(*) FILTER (WHERE outcome = 'lease-expired'),"
                    + " (SELECT count(*) FROM rollcall.epochs WHERE namespace = ?"
                    + " AND kind = 'takeover')"
                    + " FROM rollcall.ledger WHERE namespace = ?",
                NAMESPACE,
                NAMESPACE)
            .get(0);
    return new Outcome(
        Long.parseLong(counts.get(0)),
        Long.parseLong(counts.get(1)),
        Long.parseLong(counts.get(2)),
        unexplained);
  }
}
