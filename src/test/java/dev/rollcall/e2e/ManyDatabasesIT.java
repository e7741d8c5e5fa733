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
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * One Rollcall deployment, two applications, two databases (issue 58): the example app of {@link
 * EndToEndIT} as three replicas on each of two PostgreSQL servers, each application in a namespace
 * of its own, and Rollcall as two service replicas whose default datasource is the first server and
 * which open the second themselves ({@code rollcall.databases.second}).
 *
 * <ol>
 *   <li><b>A kill on each.</b> A replica of each application executing steps is killed with
 *       SIGKILL; every run each held finishes, each taken over in its own database.
 *   <li><b>One database stopped while the other recovers.</b> The second server is stopped; a
 *       replica of the first application is killed, and its runs finish while the second database
 *       is down. Every service replica stays ready meanwhile (readiness is asked while it is down).
 *       The second server is started again; the app replicas that exited with it are started again,
 *       as an orchestrator would (world-postgres 5.0.0-beta.29 exits when its database goes, see
 *       {@link DatabaseRestartIT}), and a replica of the second application is killed: its runs
 *       finish too.
 * </ol>
 *
 * <p>Asserts the suite's invariants ({@link Measurement#violations}: no run unfinished among
 * others) and the readiness; prints the takeover figures of each database. Properties as {@link
 * EndToEndIT} ({@code e2e.runs}, {@code e2e.step-ms}, {@code e2e.seed}, {@code e2e.deadline-s},
 * {@code e2e.line}) and {@code e2e.down-ms} (at least how long the second server stays down,
 * default 5000).
 */
@Tag("e2e")
class ManyDatabasesIT {

  static final String SECOND = "e2e-second";

  @Test
  void oneDeploymentServesTwoApplicationsOnTwoDatabasesThroughKillsAndAnOutageOfOne()
      throws Exception {
    Settings s = Settings.fromProperties();
    int downMs = Integer.getInteger("e2e.down-ms", 5_000);
    ExampleApp.prepare(s.line());
    List<String> failures = new ArrayList<>();
    List<Measurement> rows = new ArrayList<>();
    try (RestartablePostgres pgA = RestartablePostgres.create("e2e-many-a");
        RestartablePostgres pgB = RestartablePostgres.create("e2e-many-b")) {
      TestDatabase a = pgA.database();
      TestDatabase b = pgB.database();
      ExampleApp.bootstrap(s.line(), a);
      ExampleApp.bootstrap(s.line(), b);
      System.out.printf(
          "%nTwo applications on two databases behind one Rollcall deployment, SDK line %s (seed"
              + " %d, %d cores, load %s): %d runs a round, steps of %d ms%n",
          s.line().label,
          s.seed(),
          Runtime.getRuntime().availableProcessors(),
          Latencies.loadAverage(),
          s.runs(),
          s.stepMs());
      Map<String, String> second = RollcallServices.namespaceIn(SECOND, "second", b);
      try (RollcallServices services = RollcallServices.start(a, 2, second)) {
        Cluster ca = new Cluster(a, services.appEnv(s.recovery(), s.targetWorld()), s, "many-a");
        Cluster cb =
            new Cluster(b, services.appEnv(s.recovery(), s.targetWorld(), SECOND), s, "many-b");
        try {
          Measurement both = new Measurement("two databases, kill -9 in each", s.deadlineS());
          ca.fillUp(3);
          cb.fillUp(3);
          ca.awaitSessionProofArmed();
          cb.awaitSessionProofArmed();
          Round ra = ca.round(0);
          Round rb = cb.round(0);
          ra.stop(true);
          rb.stop(true);
          ra.measure(s.deadlineS());
          rb.measure(s.deadlineS());
          both.add(ra);
          both.add(rb);
          rows.add(both);
          failures.addAll(both.violations());
          printTakeovers("first database", a, ra);
          printTakeovers("second database", b, rb);

          // The second database goes down; the first's application loses a replica meanwhile.
          Measurement whileDown =
              new Measurement("first database, kill -9 while the second is down", s.deadlineS());
          ca.fillUp(3);
          ca.awaitSessionProofArmed();
          DatabaseRestarts restartsB = new DatabaseRestarts(pgB, cb, 0);
          for (ExampleApp.Replica r : cb.live) {
            r.process().onExit(t -> cb.endedAt.putIfAbsent(r.name(), t));
          }
          long stoppedAt = System.currentTimeMillis();
          pgB.stop();
          List<String> readyWhileDown = new ArrayList<>();
          Round ra2 = killed(ca, 1, s, () -> readyWhileDown.addAll(services.readiness()));
          keep(whileDown, ra2, rows, failures);
          printTakeovers("first database, the second down", a, ra2);
          System.out.printf(
              "  service replicas' readiness while the second database was down: %s%n",
              readyWhileDown);
          for (String status : readyWhileDown) {
            if (!status.equals("200")) {
              failures.add(
                  "a service replica was not ready while one database was down: " + status);
            }
          }
          long left = stoppedAt + downMs - System.currentTimeMillis();
          if (left > 0) {
            Thread.sleep(left);
          }
          pgB.start();
          System.out.printf(
              "  the second database was down %d ms%n", System.currentTimeMillis() - stoppedAt);
          List<String> exited = restartsB.replaceExited();
          System.out.printf(
              "  second application's replicas that exited with their database (started again):"
                  + " %s%n",
              exited);

          Measurement after =
              new Measurement("second database, kill -9 after its outage", s.deadlineS());
          cb.fillUp(3);
          cb.awaitSessionProofArmed();
          Round rb2 = killed(cb, 1, s, () -> {});
          keep(after, rb2, rows, failures);
          printTakeovers("second database, after its outage", b, rb2);
          System.out.printf(
              "  outages counted by the service replicas: %s%n",
              services.counter("rollcall_coordinator_outages_total"));
        } finally {
          ca.close();
          cb.close();
        }
      }
    }
    System.out.printf("%n%s%n", Measurement.table(rows));
    System.out.printf("load average at the end: %s%n", Latencies.loadAverage());
    assertEquals(List.of(), failures, "invariants broken (see the output above)");
  }

  /**
   * A round of {@code cluster} whose busiest replica is killed with SIGKILL, {@code meanwhile} run
   * right after the kill, then measured.
   */
  private static Round killed(Cluster cluster, int n, Settings s, Runnable meanwhile)
      throws InterruptedException {
    Round round = cluster.round(n);
    round.stop(true);
    meanwhile.run();
    round.measure(s.deadlineS());
    return round;
  }

  /** The round's figures into {@code m}, kept with the rows of the table, and what it broke. */
  private static void keep(
      Measurement m, Round round, List<Measurement> rows, List<String> failures) {
    m.add(round);
    rows.add(m);
    failures.addAll(m.violations());
  }

  /** The takeover of the round's stopped replica, in its own database: its proof and timings. */
  private static void printTakeovers(String where, TestDatabase db, Round round) {
    List<List<String>> rows =
        db.rows(
            "SELECT i.end_reason, e.state,"
                + " round(extract(epoch FROM e.created_at - i.last_heartbeat_at) * 1000)::text,"
                + " (SELECT count(*) FROM rollcall.ledger l WHERE l.epoch_id = e.id"
                + "   AND l.outcome = 'lock-released')::text"
                + " FROM rollcall.instances i JOIN rollcall.epochs e"
                + "   ON e.subject_instance_id = i.id AND e.kind = 'takeover'"
                + " WHERE i.name = ?",
            round.victim.name());
    System.out.printf(
        "  %s: %s killed holding %d runs; its takeover (proof, state, ms after its last"
            + " heartbeat, queue locks released): %s%n",
        where, round.victim.name(), round.held.size(), rows);
  }
}
