package dev.rollcall.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.rollcall.bench.Latencies;
import dev.rollcall.e2e.EndToEndIT.Cluster;
import dev.rollcall.e2e.EndToEndIT.Measurement;
import dev.rollcall.e2e.EndToEndIT.Round;
import dev.rollcall.e2e.EndToEndIT.Settings;
import dev.rollcall.testing.RestartablePostgres;
import dev.rollcall.testing.TestDatabase;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * PostgreSQL restarted under the real runtime (issue 57, scenario 4): the example app of {@link
 * EndToEndIT} as three replicas on the 5.0 line, Rollcall as two service replicas, all on one
 * PostgreSQL that the test stops (fast shutdown) and starts again on the same port and data.
 *
 * <ol>
 *   <li><b>During a takeover.</b> A replica executing steps is killed with SIGKILL; as soon as the
 *       service's session check has seen its lock missing, and before the death is declared (two
 *       checks a second apart), PostgreSQL is stopped. The death, the release of its queue locks
 *       and the hand-out of its runs are one transaction, so the restart falls between the death
 *       and the release of its locks; the output says whether it did, from the ledger (the takeover
 *       opened, and its locks were released, after the database was back).
 *   <li><b>During a boot pass.</b> With runs in flight on every replica, a replica of a new deploy
 *       starts; its first claim opens the deploy's boot pass, and PostgreSQL is stopped as soon as
 *       the pass is seen open (the service is given small batches, {@code e2e.batch-size}, so the
 *       pass lasts seconds); the output says how long it had been open.
 * </ol>
 *
 * <p>The engine as shipped does not survive a database restart: world-postgres 5.0.0-beta.29's
 * stream listener is a {@code pg} Client with no error handler, so the restart ending its session
 * is an unhandled error that ends the process. Every app replica exits with the database, and is
 * started again with the same deployment id, as an orchestrator would; their deaths are real. With
 * {@code -De2e.app-survives=true} the replicas run with {@code E2E_SURVIVE_DB_RESTART=1} instead
 * (the example app ignores that one error, as a world that handled it would): they live on, which
 * shows whether Rollcall declares a live process dead, and what the engine's queue does next
 * (graphile-worker 0.16's workers that could not release a job exit and are not replaced: a known
 * failure of that mode, described in docs/operations.md). Asserts: 0 runs unfinished, the boot pass
 * and every takeover closed, no instance of a live process declared dead, and the suite's own
 * invariants ({@link Measurement#violations}). Prints, from the database back up: the takeover and
 * the pass closed, the runs completed after the restart p50 / p99 / max, the deaths by proof.
 * Figures, never timed assertions.
 *
 * <p>Properties: {@code e2e.takeover-restarts} (rounds of the first scenario, default 1), {@code
 * e2e.boot-runs} (runs started while the new deploy's replica boots, at most; default 30), {@code
 * e2e.runs} (runs a takeover round starts, default 10), {@code e2e.down-ms} (how long the database
 * stays down, default 3000), {@code e2e.batch-size} (the service's {@code
 * rollcall.batch.default-size}, default 5), {@code e2e.app-survives} (default false), and {@code
 * e2e.step-ms}, {@code e2e.seed}, {@code e2e.deadline-s} as in {@link EndToEndIT}.
 */
@Tag("db-restart")
class DatabaseRestartIT {

  static final String NAMESPACE = RollcallServices.NAMESPACE;

  @Test
  void postgresRestartedDuringATakeoverAndABootPassLosesNoRunAndDeclaresNoLiveReplicaDead()
      throws Exception {
    Settings s = Settings.fromProperties();
    int takeoverRounds = Integer.getInteger("e2e.takeover-restarts", 1);
    int bootRuns = Integer.getInteger("e2e.boot-runs", 30);
    int downMs = Integer.getInteger("e2e.down-ms", 3_000);
    int batchSize = Integer.getInteger("e2e.batch-size", 5);
    boolean survive = Boolean.parseBoolean(System.getProperty("e2e.app-survives", "false"));
    ExampleApp.prepare(s.line());
    List<String> failures = new ArrayList<>();
    try (RestartablePostgres pg = RestartablePostgres.create("e2e-pg-restart")) {
      TestDatabase db = pg.database();
      ExampleApp.bootstrap(s.line(), db);
      System.out.printf(
          "%nPostgreSQL restarted, SDK line %s (seed %d, %d cores, load %s): %d takeover rounds of"
              + " %d runs, a boot pass over up to %d runs in batches of %d, down %d ms each time; the"
              + " app replicas %s%n",
          s.line().label,
          s.seed(),
          Runtime.getRuntime().availableProcessors(),
          Latencies.loadAverage(),
          takeoverRounds,
          s.runs(),
          bootRuns,
          batchSize,
          downMs,
          survive
              ? "survive the restart (E2E_SURVIVE_DB_RESTART)"
              : "as shipped (they exit with the database; started again)");
      Map<String, String> service =
          Map.of("rollcall.batch.default-size", String.valueOf(batchSize));
      try (RollcallServices services = RollcallServices.start(db, 2, service)) {
        Map<String, String> env = new HashMap<>(services.appEnv("world", s.targetWorld()));
        if (survive) {
          env.put("E2E_SURVIVE_DB_RESTART", "1");
        }
        Cluster cluster = new Cluster(db, env, s, "pgr");
        DatabaseRestarts restarts = new DatabaseRestarts(pg, cluster, downMs);
        try {
          for (int i = 0; i < takeoverRounds; i++) {
            failures.addAll(duringATakeover(restarts, cluster, i));
          }
          failures.addAll(duringABootPass(restarts, cluster, bootRuns));
          System.out.printf(
              "%n  app replicas that exited by themselves (started again): %s%n",
              restarts.exitedByThemselves);
          System.out.printf(
              "  outages counted by the service replicas: %s%n",
              services.counter("rollcall_coordinator_outages_total"));
        } finally {
          cluster.close();
        }
      }
    }
    System.out.printf("  load average at the end: %s%n", Latencies.loadAverage());
    assertEquals(List.of(), failures, "invariants broken (see the output above)");
  }

  /**
   * Kills a replica and restarts the database once the service has seen its lock missing, before
   * the death's transaction (which releases its locks) commits.
   */
  private static List<String> duringATakeover(DatabaseRestarts restarts, Cluster cluster, int n)
      throws Exception {
    TestDatabase db = cluster.db;
    cluster.fillUp(3);
    cluster.awaitSessionProofArmed();
    String since = Outcomes.now(db);
    Round round = cluster.round(n);
    // Right after the kill, before anything else is read: the database goes down as soon as the
    // service's session check has seen the killed replica's lock missing.
    String[] atStop = new String[1];
    DatabaseRestarts.Restart[] restart = new DatabaseRestarts.Restart[1];
    round.stop(
        true,
        () -> {
          atStop[0] = awaitSighting(db, round.victim.name());
          restart[0] = restarts.restart();
        });
    DatabaseRestarts.Restart r = restart[0];
    String victimId = instanceId(db, round.victim.name());
    List<String> exited = restarts.replaceExited();
    round.measure(s(cluster).deadlineS());
    Measurement m =
        new Measurement("PostgreSQL restarted during a takeover", s(cluster).deadlineS());
    m.add(round);
    List<String> failures = new ArrayList<>(m.violations());
    failures.addAll(awaitTakeoversClosed(db, since, s(cluster).deadlineS()));

    List<String> takeover =
        db
            .rows(
                "SELECT e.id::text, e.state,"
                    + " round(extract(epoch FROM e.created_at - ?::timestamptz) * 1000)::text,"
                    + " coalesce(round(extract(epoch FROM e.closed_at - ?::timestamptz) * 1000)"
                    + "   ::text, '-'), coalesce(i.end_reason, '-'),"
                    + " (SELECT count(*) || ' at ' || coalesce(round(extract(epoch FROM"
                    + "   min(l.recorded_at) - ?::timestamptz) * 1000)::text, '-')"
                    + "   FROM rollcall.ledger l WHERE l.epoch_id = e.id"
                    + "   AND l.outcome = 'lock-released')"
                    + " FROM rollcall.epochs e JOIN rollcall.instances i"
                    + "   ON i.id = e.subject_instance_id WHERE e.kind = 'takeover'"
                    + " AND e.subject_instance_id = ?::uuid",
                r.upAt(),
                r.upAt(),
                r.upAt(),
                victimId)
            .stream()
            .findFirst()
            .orElse(List.of("-", "none", "-", "-", "-", "-"));
    boolean fellBetween =
        !takeover.get(2).equals("-")
            && Long.parseLong(takeover.get(2)) >= 0
            && !atStop[0].startsWith("already");
    List<Long> completed = completedAfter(db, round.runs, r.upAt());
    System.out.printf(
        "%n  round %d: killed %s holding %d runs; PostgreSQL stopped %d ms after the kill, the"
            + " killed replica then %s; down %d ms%n",
        n,
        round.victim.name(),
        round.held.size(),
        r.stoppedAtMs() - round.stoppedAt,
        atStop[0],
        r.downForMs());
    System.out.printf(
        "  its takeover (epoch %s, %s, proof %s) opened %s ms and closed %s ms after the database"
            + " was back up; queue locks released: %s ms; the restart fell between the death and"
            + " the release of its locks: %s%n",
        takeover.get(0),
        takeover.get(1),
        takeover.get(4),
        takeover.get(2),
        takeover.get(3),
        takeover.get(5),
        fellBetween ? "yes" : "NO");
    failures.addAll(commonFigures(db, cluster, since, exited, round, completed));
    return failures;
  }

  /** The id of the instance the replica {@code name} registered last. */
  private static String instanceId(TestDatabase db, String name) {
    return db.column(
            "SELECT id::text FROM rollcall.instances WHERE namespace = ? AND name = ?"
                + " ORDER BY registered_at DESC LIMIT 1",
            NAMESPACE,
            name)
        .get(0);
  }

  /**
   * Waits until the service's session check has seen the killed replica's lock missing (its death
   * found, not yet declared: that takes a second confirming check a second later), or until the
   * death is declared (too late); says which, and how long ago the lock was first seen missing.
   */
  private static String awaitSighting(TestDatabase db, String name) throws InterruptedException {
    String id = instanceId(db, name);
    long until = System.currentTimeMillis() + 10_000;
    for (; ; ) {
      List<String> row =
          db.row(
              "SELECT state, coalesce(round(extract(epoch FROM now() - session_missing_since)"
                  + " * 1000)::text, '-') FROM rollcall.instances WHERE id = ?::uuid",
              id);
      if (!row.get(0).equals("live")) {
        return "already declared " + row.get(0) + ": the restart came after the takeover";
      }
      if (!row.get(1).equals("-")) {
        return "live, its lock seen missing "
            + row.get(1)
            + " ms before: its death found, not yet"
            + " declared";
      }
      if (System.currentTimeMillis() > until) {
        return "live, its lock not seen missing within 10 s of the kill";
      }
      Thread.sleep(10);
    }
  }

  /**
   * Restarts the database while a new deploy's boot pass is open: the new replica boots on another
   * thread while runs are started on the old ones, five at a time (one of each kind), until its
   * first claim has opened the pass; the database is stopped as soon as the pass is seen open.
   */
  private static List<String> duringABootPass(DatabaseRestarts restarts, Cluster cluster, int runs)
      throws Exception {
    TestDatabase db = cluster.db;
    cluster.fillUp(3);
    cluster.awaitSessionProofArmed();
    String since = Outcomes.now(db);
    Round round = new Round(cluster);
    String deploy = "deploy-" + UUID.randomUUID();
    Map<String, String> fresh = Map.of("ROLLCALL_DEPLOYMENT_ID", deploy);
    var booting = restarts.launch(fresh);
    // Runs are started on the old replicas on another thread while this one watches for the pass,
    // so that the database goes down within milliseconds of the pass being seen open.
    AtomicBoolean enough = new AtomicBoolean();
    AtomicReference<RuntimeException> notStarted = new AtomicReference<>();
    Thread starter =
        new Thread(
            () -> {
              try {
                while (!enough.get() && round.runs.size() < runs) {
                  int k = round.runs.size();
                  cluster.addRuns(round, "boot-" + k, Math.min(5, runs - k));
                }
              } catch (RuntimeException e) {
                notStarted.set(e); // a start the restart cut short
              }
            });
    starter.start();
    String openFor = null;
    long until = System.currentTimeMillis() + 120_000;
    while (openFor == null && System.currentTimeMillis() < until) {
      List<List<String>> pass =
          db.rows(
              "SELECT state, round(extract(epoch FROM now() - created_at) * 1000)::text"
                  + " FROM rollcall.epochs WHERE namespace = ? AND kind = 'boot'"
                  + " AND deployment_id = ?",
              NAMESPACE,
              deploy);
      if (pass.isEmpty()) {
        Thread.sleep(10);
      } else {
        openFor = pass.get(0).get(0) + " for " + pass.get(0).get(1) + " ms";
      }
    }
    enough.set(true);
    DatabaseRestarts.Restart r = restarts.restart();
    starter.join();
    int added = round.runs.size();
    if (notStarted.get() != null) {
      System.out.printf("  a run start cut short by the restart: %s%n", notStarted.get());
    }
    round.startWithoutStop();
    // The new deploy's replica first: if it exited with the database, it is started again too
    // (without it, nobody of its deploy claims, and its pass waits for the stranded-pass grace).
    restarts.adopt(booting, fresh);
    List<String> exited = restarts.replaceExited();
    round.measure(s(cluster).deadlineS());
    Measurement m =
        new Measurement("PostgreSQL restarted during a boot pass", s(cluster).deadlineS());
    m.add(round);
    List<String> failures = new ArrayList<>(m.violations());
    failures.addAll(awaitTakeoversClosed(db, since, s(cluster).deadlineS()));
    List<String> pass =
        awaitClosed(
            db,
            "SELECT state, coalesce(close_reason, '-'),"
                + " round(extract(epoch FROM created_at - ?::timestamptz) * 1000)::text,"
                + " coalesce(round(extract(epoch FROM closed_at - ?::timestamptz) * 1000)::text,"
                + "   '-') FROM rollcall.epochs WHERE namespace = ? AND kind = 'boot'"
                + " AND deployment_id = ?",
            s(cluster).deadlineS(),
            r.upAt(),
            r.upAt(),
            NAMESPACE,
            deploy);
    if (pass.isEmpty() || !pass.get(0).equals("closed")) {
      failures.add("the new deploy's boot pass did not close: " + pass);
    }
    boolean openAtStop = openFor != null && openFor.startsWith("open");
    System.out.printf(
        "%n  boot pass of a new deploy, %d runs started while its replica booted: at the stop it was %s (the restart"
            + " fell inside the pass: %s); down %d ms; the pass %s (%s) opened %s ms and closed %s"
            + " ms after the database was back up; batches: %s; its ledger: %s%n",
        added,
        openFor == null ? "not seen within 120 s" : openFor,
        openAtStop ? "yes" : "NO",
        r.downForMs(),
        pass.isEmpty() ? "-" : pass.get(0),
        pass.isEmpty() ? "-" : pass.get(1),
        pass.isEmpty() ? "-" : pass.get(2),
        pass.isEmpty() ? "-" : pass.get(3),
        db.column(
            "SELECT count(*) || ' (' || coalesce(sum(attempts), 0) || ' hand-outs)'"
                + " FROM rollcall.batches b JOIN rollcall.epochs e ON e.id = b.epoch_id"
                + " WHERE e.namespace = ? AND e.kind = 'boot' AND e.deployment_id = ?",
            NAMESPACE,
            deploy),
        db.rows(
            "SELECT l.outcome || ' ' || l.reason, count(*)::text FROM rollcall.ledger l"
                + " JOIN rollcall.epochs e ON e.id = l.epoch_id WHERE e.namespace = ?"
                + " AND e.kind = 'boot' AND e.deployment_id = ? GROUP BY 1 ORDER BY 1",
            NAMESPACE,
            deploy));
    failures.addAll(
        commonFigures(db, cluster, since, exited, round, completedAfter(db, round.runs, r.upAt())));
    return failures;
  }

  /** Prints what both scenarios print; returns the live instances declared dead as failures. */
  private static List<String> commonFigures(
      TestDatabase db,
      Cluster cluster,
      String since,
      List<String> exited,
      Round round,
      List<Long> completed) {
    List<String> liveDead = new ArrayList<>(Outcomes.liveDeclaredDead(db, cluster, since));
    liveDead.addAll(deadWhileAlive(db, cluster, since));
    System.out.printf(
        "  runs of the round completed after the database was back up: p50 / p99 / max %s (%d of"
            + " %d; %d unfinished)%n",
        Outcomes.triple(completed), completed.size(), round.runs.size(), round.unfinished);
    System.out.printf(
        "  app replicas that exited with the database: %s; deaths by proof since the round began:"
            + " %s; live instances declared dead: %d %s%n",
        exited, Outcomes.deathsByProof(db, since), liveDead.size(), liveDead);
    return liveDead.isEmpty() ? List.of() : List.of("live instances declared dead: " + liveDead);
  }

  /**
   * Instances declared dead since {@code since} while their process was still running, though it
   * has ended since (it exited with the database later, say): a replica's process ended after the
   * death was declared, or has not ended. {@link Outcomes#liveDeclaredDead} sees only the processes
   * alive at the end.
   */
  private static List<String> deadWhileAlive(TestDatabase db, Cluster cluster, String since) {
    List<String> out = new ArrayList<>();
    for (List<String> row :
        db.rows(
            "SELECT name, coalesce(end_reason, '-'),"
                + " (extract(epoch FROM ended_at) * 1000)::bigint::text FROM rollcall.instances"
                + " WHERE namespace = ? AND state = 'dead' AND ended_at >= ?::timestamptz",
            NAMESPACE,
            since)) {
      long declared = Long.parseLong(row.get(2));
      Long ended = cluster.endedAt.get(row.get(0));
      boolean known = cluster.all.stream().anyMatch(r -> r.name().equals(row.get(0)));
      boolean running =
          cluster.all.stream().anyMatch(r -> r.name().equals(row.get(0)) && r.process().isAlive());
      if (known && !running && ended != null && ended > declared) {
        out.add(
            row.get(0)
                + " ("
                + row.get(1)
                + ", its process ended "
                + (ended - declared)
                + " ms after)");
      }
    }
    return out;
  }

  /** The runs' completions after {@code at}, in ms from it, sorted. */
  private static List<Long> completedAfter(TestDatabase db, List<String> runs, String at) {
    return Outcomes.sinceReturn(db, runs, at).stream().filter(ms -> ms >= 0).toList();
  }

  /** Every takeover opened since {@code since} closed, or the ones still open, as failures. */
  private static List<String> awaitTakeoversClosed(TestDatabase db, String since, int deadlineS)
      throws InterruptedException {
    List<String> open =
        awaitClosed(
            db,
            "SELECT CASE WHEN count(*) = 0 THEN 'closed' ELSE 'open'"
                + " || string_agg(' ' || id, ',') END FROM rollcall.epochs"
                + " WHERE namespace = ? AND kind = 'takeover' AND created_at >= ?::timestamptz"
                + " AND state = 'open'",
            deadlineS,
            NAMESPACE,
            since);
    return open.get(0).equals("closed") ? List.of() : List.of("takeovers not closed: " + open);
  }

  /**
   * Polls {@code sql} (its first column {@code closed} once done) until it reads so or {@code
   * deadlineS} has passed; returns its last row (empty when none).
   */
  private static List<String> awaitClosed(
      TestDatabase db, String sql, int deadlineS, Object... params) throws InterruptedException {
    long until = System.currentTimeMillis() + deadlineS * 1_000L;
    for (; ; ) {
      List<List<String>> rows = db.rows(sql, params);
      List<String> row = rows.isEmpty() ? List.of() : rows.get(0);
      if ((!row.isEmpty() && row.get(0).equals("closed")) || System.currentTimeMillis() > until) {
        return row;
      }
      Thread.sleep(250);
    }
  }

  private static Settings s(Cluster cluster) {
    return cluster.settings;
  }
}
