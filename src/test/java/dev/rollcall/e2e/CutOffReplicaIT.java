package dev.rollcall.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.rollcall.bench.Latencies;
import dev.rollcall.config.RollcallConfig;
import dev.rollcall.e2e.EndToEndIT.Cluster;
import dev.rollcall.e2e.EndToEndIT.Journal;
import dev.rollcall.e2e.EndToEndIT.Round;
import dev.rollcall.e2e.EndToEndIT.Settings;
import dev.rollcall.testing.TcpBalancer;
import dev.rollcall.testing.TestDatabase;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * One app replica cut off from Rollcall while its database stays reachable, on the real runtime
 * (issue 57, scenario 3). Its traffic to the service goes through a TCP path of the test's own that
 * stops forwarding (open connections cut, new ones never answered); the other replicas and the
 * service run on. The replica's lease runs out and the service declares it dead (its session lock
 * is still held: a lease that ran out while the service ran is the evidence here) and takes over
 * its runs. Meanwhile the replica's client finds its lease lapsed and the database showing the
 * service running, so it holds every new delivery back; once the path heals, the service answers
 * its heartbeat gone, the held deliveries are dropped (their jobs go to the peers that took over),
 * and it registers again as a new instance and serves.
 *
 * <p>Asserts: no delivery admitted on the cut-off replica later than one lease TTL after the cut
 * (until the heal); 0 runs unfinished; every step whose body ran on it (before the heal) and on a
 * peer, and every run replayed by it and a peer at once, belongs to a run it was executing when it
 * was declared dead (what it executed then finished or was abandoned there, and ran again on a
 * peer; a delivery it held back never ran), and no step ran more than twice; it registered again
 * after the heal and executed deliveries after it. Prints the steps it was executing at the cut and
 * at its death, the steps run twice, the death's proof and time, and the end-to-end suite's round
 * summary.
 *
 * <p>Properties: {@code e2e.cut-s} (how long the path stays cut; default 25, longer than the lease
 * TTL), {@code e2e.runs} (runs started before the cut, during it and after the heal; default 10),
 * and {@code e2e.step-ms}, {@code e2e.seed}, {@code e2e.target-world} as in {@link EndToEndIT}. The
 * zero-code world module on the 5.0 line (the client's delivery admission is wired there).
 */
@Tag("e2e")
class CutOffReplicaIT {

  static final String NAMESPACE = RollcallServices.NAMESPACE;

  @Test
  void aReplicaCutOffFromRollcallTakesNoDeliveryPastItsLeaseAndRegistersAgainOnceHealed()
      throws Exception {
    Settings s = Settings.fromProperties();
    int cutS = Integer.getInteger("e2e.cut-s", 25);
    long ttlMs = Cluster.defaultMs(RollcallConfig.class, "leaseTtl");
    ExampleApp.prepare(s.line());
    List<String> failures = new ArrayList<>();
    try (TestDatabase db = TestDatabase.start()) {
      ExampleApp.bootstrap(s.line(), db);
      System.out.printf(
          "%nOne replica cut off from Rollcall for %d s, SDK line %s (seed %d, %d cores, load %s):"
              + " lease TTL %d ms, %d runs before the cut, during it and after the heal%n",
          cutS,
          s.line().label,
          s.seed(),
          Runtime.getRuntime().availableProcessors(),
          Latencies.loadAverage(),
          ttlMs,
          s.runs());
      try (RollcallServices services = RollcallServices.start(db, 2);
          TcpBalancer path = new TcpBalancer()) {
        path.add(services.url());
        Cluster cluster = new Cluster(db, services.appEnv("world", s.targetWorld()), s, "cut");
        try {
          ExampleApp.Replica cut =
              cluster.start(Map.of("ROLLCALL_URL", path.url().toString()), true);
          cluster.fillUp(3);
          cluster.awaitSessionProofArmed();
          Round round = cluster.round(0);
          awaitExecuting(round, cut);

          round.cutOff(cut);
          path.cut();
          long cutAt = round.stoppedAt;
          String cutAtDb = RollcallOutageIT.now(db);
          cluster.addRuns(round, "cut", s.runs());
          long left = cutAt + cutS * 1_000L - System.currentTimeMillis();
          if (left > 0) {
            Thread.sleep(left);
          }
          long healAt = System.currentTimeMillis();
          path.heal();
          boolean again = awaitRegisteredAgain(db, cut.name(), cutAtDb);
          cluster.addRuns(round, "healed", s.runs());
          round.measure(cutS + s.deadlineS());
          System.out.printf("  %s%n", round.summary());

          List<Journal> own =
              cluster.journal().stream().filter(j -> j.replica().equals(cut.name())).toList();
          List<List<String>> death =
              db.rows(
                  "SELECT coalesce(end_reason, state),"
                      + " (extract(epoch FROM ended_at) * 1000)::bigint::text"
                      + " FROM rollcall.instances WHERE namespace = ? AND name = ?"
                      + " AND registered_at < ?::timestamptz",
                  NAMESPACE,
                  cut.name(),
                  cutAtDb);
          long diedAt =
              death.isEmpty() || death.get(0).get(1) == null
                  ? Long.MAX_VALUE
                  : Long.parseLong(death.get(0).get(1));
          List<Journal> admittedLate =
              own.stream()
                  .filter(j -> j.event().equals("admitted"))
                  .filter(j -> j.t() > cutAt + ttlMs && j.t() < healAt)
                  .toList();
          long lastAdmitted =
              own.stream()
                  .filter(j -> j.event().equals("admitted"))
                  .filter(j -> j.t() >= cutAt && j.t() < healAt)
                  .mapToLong(Journal::t)
                  .max()
                  .orElse(cutAt);
          long admittedAfterHeal =
              own.stream().filter(j -> j.event().equals("admitted") && j.t() > healAt).count();
          Set<String> atCut = openSteps(own, cutAt);
          Set<String> atDeath = openSteps(own, diedAt);
          Set<String> executingAtDeath = executing(own, diedAt);
          StepBodies bodies = StepBodies.of(cluster.journal(), round.runs);
          Map<String, String> runOfStep = runOfStep(cluster.journal());
          List<String> twice =
              bodies.starts().entrySet().stream()
                  .filter(e -> e.getValue() > 1)
                  .map(Map.Entry::getKey)
                  .sorted()
                  .toList();
          // Steps run twice because of the cut: once on the cut-off replica before the heal, once
          // on a peer (the 5.0 runtime itself may run a step twice, on peers or on the replica once
          // it registered again: a retried attempt, parallel deliveries of a fan-out).
          Map<String, Set<String>> replicasOfStep = replicasOfStep(cluster.journal());
          Set<String> startedThereBeforeHeal = new HashSet<>();
          own.stream()
              .filter(j -> j.event().equals("step-start") && j.t() < healAt)
              .forEach(j -> startedThereBeforeHeal.add(j.e().path("stepId").asText()));
          List<String> twiceAcross =
              twice.stream()
                  .filter(startedThereBeforeHeal::contains)
                  .filter(st -> replicasOfStep.get(st).size() > 1)
                  .toList();
          List<String> twiceOutside =
              twiceAcross.stream()
                  .filter(st -> !executingAtDeath.contains(runOfStep.get(st)))
                  .toList();
          // Runs replayed by two replicas at once, a delivery the cut-off replica held back and
          // dropped not counted (it never executed): only what it was executing at its death may
          // be.
          List<String> replayedAtOnce =
              Deliveries.replayedAtOnce(
                  withoutHeldBack(cluster.journal(), cut.name()),
                  round.runs,
                  Map.of(),
                  System.currentTimeMillis());
          List<String> replayedOutside =
              replayedAtOnce.stream().filter(r -> !executingAtDeath.contains(r)).toList();
          long heldBack =
              own.stream().filter(j -> j.event().equals("flow-start")).count()
                  - own.stream().filter(j -> j.event().equals("admitted")).count();

          System.out.printf(
              "  declared dead: %s, %s ms after the cut%n",
              death.isEmpty() ? "no" : death.get(0).get(0),
              diedAt == Long.MAX_VALUE ? "–" : String.valueOf(diedAt - cutAt));
          System.out.printf(
              "  deliveries admitted on it: the last during the cut %d ms after the cut (lease TTL"
                  + " %d ms); later than the TTL: %d%s; after the heal: %d%n",
              lastAdmitted - cutAt,
              ttlMs,
              admittedLate.size(),
              admittedLate.isEmpty() ? "" : " " + admittedLate,
              admittedAfterHeal);
          System.out.printf(
              "  deliveries it held back and dropped: %d; runs it was executing at its death: %d;"
                  + " runs replayed by it and a peer at once: %d %s, of them outside those: %d%n",
              heldBack,
              executingAtDeath.size(),
              replayedAtOnce.size(),
              replayedAtOnce,
              replayedOutside.size());
          System.out.printf(
              "  steps it was executing at the cut %d, at its death %d; steps whose body ran twice"
                  + " %d (max runs of one body %d), of them once on it before the heal and once on a"
                  + " peer %d %s,"
                  + " of those outside the runs it executed at its death: %d%n",
              atCut.size(),
              atDeath.size(),
              twice.size(),
              bodies.max(),
              twiceAcross.size(),
              twiceAcross,
              twiceOutside.size());
          System.out.printf(
              "  registered again after the heal: %s (%s); runs unfinished: %d; load average at the"
                  + " end: %s%n",
              again,
              db.rows(
                  "SELECT state, coalesce(end_reason, '') FROM rollcall.instances"
                      + " WHERE namespace = ? AND name = ? ORDER BY registered_at",
                  NAMESPACE,
                  cut.name()),
              round.unfinished,
              Latencies.loadAverage());

          if (!admittedLate.isEmpty()) {
            failures.add(
                admittedLate.size() + " deliveries admitted later than a lease TTL after the cut");
          }
          if (round.unfinished > 0) {
            failures.add(round.unfinished + " runs unfinished " + round.stateOfUnfinished.values());
          }
          if (bodies.max() > 2) {
            failures.add("a step's body ran " + bodies.max() + " times");
          }
          if (!twiceOutside.isEmpty()) {
            failures.add("steps run twice outside the runs executing at the death " + twiceOutside);
          }
          if (!replayedOutside.isEmpty()) {
            failures.add(
                "runs replayed at once outside those executing at the death " + replayedOutside);
          }
          if (diedAt == Long.MAX_VALUE) {
            failures.add("the cut-off replica's instance was not declared dead");
          }
          if (!again || admittedAfterHeal == 0) {
            failures.add(
                "after the heal: registered again " + again + ", deliveries " + admittedAfterHeal);
          }
          if (!round.parkedWithNewJob.isEmpty() || !round.parkedHandedOut.isEmpty()) {
            failures.add(
                "parked runs given a job "
                    + round.parkedWithNewJob
                    + " or handed out "
                    + round.parkedHandedOut);
          }
        } finally {
          cluster.close();
        }
      }
    }
    assertEquals(List.of(), failures, "invariants broken (see the output above)");
  }

  /** Waits (at most 30 s) until {@code replica} executes a step of the round. */
  static void awaitExecuting(Round round, ExampleApp.Replica replica) throws InterruptedException {
    long until = System.currentTimeMillis() + 30_000;
    while (round.openSteps().getOrDefault(replica.name(), 0) == 0) {
      if (System.currentTimeMillis() > until) {
        throw new IllegalStateException(replica.name() + " executed no step within 30 s");
      }
      Thread.sleep(100);
    }
  }

  /** Steps started and not ended in {@code journal} (one replica's) at {@code at}. */
  static Set<String> openSteps(List<Journal> journal, long at) {
    Map<String, Integer> balance = new HashMap<>();
    for (Journal j : journal) {
      if (j.t() > at) {
        continue;
      }
      String step = j.e().path("stepId").asText();
      if (j.event().equals("step-start")) {
        balance.merge(step, 1, Integer::sum);
      } else if (j.event().equals("step-end")) {
        balance.merge(step, -1, Integer::sum);
      }
    }
    Set<String> out = new HashSet<>();
    balance.forEach(
        (step, n) -> {
          if (n > 0) {
            out.add(step);
          }
        });
    return out;
  }

  /**
   * Runs with a delivery admitted (started executing) in {@code journal} (one replica's) and not
   * ended at {@code at}.
   */
  static Set<String> executing(List<Journal> journal, long at) {
    Map<String, Integer> balance = new HashMap<>();
    for (Journal j : journal) {
      if (j.t() > at) {
        continue;
      }
      String key = j.runId() + " " + j.e().path("messageId").asText();
      if (j.event().equals("admitted")) {
        balance.merge(key, 1, Integer::sum);
      } else if (j.event().equals("flow-end") && balance.containsKey(key)) {
        balance.merge(key, -1, Integer::sum);
      }
    }
    Set<String> out = new HashSet<>();
    balance.forEach(
        (key, n) -> {
          if (n > 0) {
            out.add(key.substring(0, key.indexOf(' ')));
          }
        });
    return out;
  }

  /** Step id → the replicas that started its body. */
  static Map<String, Set<String>> replicasOfStep(List<Journal> journal) {
    Map<String, Set<String>> out = new HashMap<>();
    for (Journal j : journal) {
      if (j.event().equals("step-start")) {
        out.computeIfAbsent(j.e().path("stepId").asText(), k -> new HashSet<>()).add(j.replica());
      }
    }
    return out;
  }

  /**
   * The journal without the flow lines of {@code replica}'s deliveries that never started executing
   * there (held back, then dropped): a delivery's {@code flow-start} and {@code flow-end} are
   * dropped unless an {@code admitted} line of the same message came between them (the same message
   * may be delivered there again later, and admitted then).
   */
  static List<Journal> withoutHeldBack(List<Journal> journal, String replica) {
    Set<Journal> dropped = new HashSet<>();
    Map<String, Journal> open = new HashMap<>();
    Set<String> admitted = new HashSet<>();
    journal.stream()
        .filter(j -> j.replica().equals(replica))
        .sorted(java.util.Comparator.comparingLong(Journal::t))
        .forEach(
            j -> {
              String message = j.e().path("messageId").asText();
              switch (j.event()) {
                case "flow-start" -> {
                  open.put(message, j);
                  admitted.remove(message);
                }
                case "admitted" -> admitted.add(message);
                case "flow-end" -> {
                  Journal start = open.remove(message);
                  if (start != null && !admitted.remove(message)) {
                    dropped.add(start);
                    dropped.add(j);
                  }
                }
                default -> {}
              }
            });
    open.forEach(
        (message, start) -> {
          if (!admitted.contains(message)) {
            dropped.add(start);
          }
        });
    return journal.stream().filter(j -> !dropped.contains(j)).toList();
  }

  /** Step id → its run, from the step lines of the journal. */
  static Map<String, String> runOfStep(List<Journal> journal) {
    Map<String, String> out = new HashMap<>();
    for (Journal j : journal) {
      if (j.event().equals("step-start")) {
        out.put(j.e().path("stepId").asText(), j.runId());
      }
    }
    return out;
  }

  /**
   * Waits (at most 60 s) until a new instance of {@code name}, registered after the cut, is live.
   */
  static boolean awaitRegisteredAgain(TestDatabase db, String name, String since)
      throws InterruptedException {
    long until = System.currentTimeMillis() + 60_000;
    while (System.currentTimeMillis() < until) {
      if (!db.column(
              "SELECT 1 FROM rollcall.instances WHERE namespace = ? AND name = ?"
                  + " AND registered_at > ?::timestamptz AND state = 'live'",
              NAMESPACE,
              name,
              since)
          .isEmpty()) {
        return true;
      }
      Thread.sleep(200);
    }
    return false;
  }
}
