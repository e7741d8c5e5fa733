package dev.rollcall.bench;

import com.fasterxml.jackson.databind.JsonNode;
import dev.rollcall.testing.Cpu;
import dev.rollcall.testing.EngineFixture;
import dev.rollcall.testing.EngineMix;
import dev.rollcall.testing.NodeReplica;
import dev.rollcall.testing.ServiceProcess;
import dev.rollcall.testing.TestDatabase;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Boot recovery of one deploy, side by side on the same seeded database: the engine's own recovery,
 * Rollcall (N client processes against one and against two service replicas) and the floor (one
 * set-based statement). The engine's schema is built by the package's own migrations and holds R
 * active runs in the {@link EngineMix#DEPLOY_MIX} mix with 3 × R terminal runs between them.
 *
 * <p>For each scenario the replicas start, get ready (Node loaded, world started, database
 * connected) and are told "go" together; wall time runs from "go" until the last replica is done.
 * Between scenarios the jobs they added are deleted, so each starts from the same seed. Rows read
 * come from PostgreSQL's table statistics (every backend has flushed them 11 s after the scenario).
 * Before each pair of Rollcall scenarios (one and two service replicas, one size and kind) the
 * floor is timed again, the median of three, and that pair's ratios are to it: the machine's speed
 * drifts over a run by up to twofold.
 *
 * <p>{@code bench/run recovery} runs it; {@code -Dbench.runs=10000,100000}, {@code
 * -Dbench.replicas=1,4,16}, {@code -Dbench.engine-cap=300} (seconds after which an engine scenario
 * is stopped and reported as unfinished), {@code -Dbench.batch=500} (the replicas' {@code maxRuns};
 * unset, they take the service's default, as the client does), {@code
 * -Dbench.scenarios=engine,rollcall} ({@code client-alone} adds Rollcall's scenarios with replicas
 * that run the client without the engine's world beside it), {@code -Dbench.stay=true} (Rollcall's
 * replicas leave only once all of them learnt "done"), {@code -Dbench.statements=15} (after each
 * Rollcall scenario, the statements PostgreSQL spent most time on: {@link StatementProfile}),
 * {@code -Dbench.perf=DIR} (a system-wide CPU profile of each measured scenario, with what names
 * each PostgreSQL backend's client: {@link SystemProfile}), {@code -Dbench.equal-processes=true}
 * (every scenario with as many application processes as the largest N: {@link #equalProcesses}),
 * {@code -Dbench.results=FILE} (a CSV row per measured Rollcall scenario and per floor timed:
 * {@link #record}).
 */
@Tag("benchmark")
class RecoveryBenchmarkIT {

  private static final String NAMESPACE = "engine";
  private static final String SECRET = "bench-registration-secret";
  private static final Duration STATS_FLUSH = Duration.ofSeconds(11);

  private final List<Integer> sizes = ints(System.getProperty("bench.runs", "10000,100000"));
  private final List<Integer> replicaCounts = ints(System.getProperty("bench.replicas", "1,4,16"));
  private final Duration engineCap = Duration.ofSeconds(Long.getLong("bench.engine-cap", 300));

  /** {@code -Dbench.batch=N}: the replicas' {@code maxRuns}; unset, the service's default. */
  private final Integer batch = Integer.getInteger("bench.batch");

  /**
   * {@code -Dbench.warmup-passes=K}: unmeasured passes on each size's seed, N = 2 and 16 in turn.
   */
  private final int warmupPasses = Integer.getInteger("bench.warmup-passes", 2);

  /**
   * {@code -Dbench.repeat=K}: each Rollcall scenario K times, as pairs of one and two service
   * replicas (every other pair two first), and a table of the pairs' differences and medians. Each
   * repetition runs every size in turn, so that sizes compared are measured close together.
   */
  private final int repeat = Math.max(1, Integer.getInteger("bench.repeat", 1));

  private final List<String> scenarios =
      List.of(System.getProperty("bench.scenarios", "engine,rollcall").split(","));

  /**
   * {@code -Dbench.stay=true}: Rollcall's replicas stay up once they learnt "done" and leave only
   * when every replica of the scenario has learnt it, as a deploy's replicas do, instead of each
   * leaving and exiting at once.
   */
  private final boolean stay = Boolean.getBoolean("bench.stay");

  /**
   * {@code -Dbench.equal-processes=true}: every Rollcall scenario runs as many application
   * processes as the largest N. Those beyond its N are bystanders: they start as its replicas do
   * (with the engine's world in the scenarios with it), take no part in recovery, and leave once
   * every replica knows the pass is done; their exit is in the wall time. The largest N against N =
   * 1 then compares Rollcall's work at N against the same number of processes merely running.
   * {@code both}: each smaller size's pair runs twice in every repetition, without and then with
   * the bystanders, and a summary splits the largest N − N = 1 into what the processes cost by
   * running and what Rollcall's work at N adds.
   */
  private final String equalProcesses = System.getProperty("bench.equal-processes", "false");

  private static final String BYSTANDER = "bench-bystander-";

  /**
   * {@code -Dbench.settle=false}: the next scenario starts right after a scenario's cleanup,
   * without {@link #settle}, as this benchmark did before (to compare).
   */
  private final boolean settleBetween =
      Boolean.parseBoolean(System.getProperty("bench.settle", "true"));

  private TestDatabase db;
  private List<ServiceProcess> services;
  private long seedJobs;
  private long rowsReadMark;
  private StatementProfile statements;
  private SystemProfile system;

  /** True during the unmeasured passes: {@link SystemProfile} records only measured windows. */
  private boolean warmingUp;

  @Test
  void sideBySide() throws Exception {
    NodeReplica.install();
    try (TestDatabase database = TestDatabase.start()) {
      db = database;
      EngineFixture.setUpSchemas(db);
      statements = StatementProfile.of(db);
      system = SystemProfile.of();
      Map<String, String> settings = new HashMap<>();
      String p = "rollcall.namespaces.\"" + NAMESPACE + "\".";
      settings.put(p + "registration-secret", SECRET);
      settings.put(p + "source.kind", "world-postgres");
      settings.put(p + "source.create-active-index", "true");
      // Only boot recovery is measured: no periodic sweep reading the runs table meanwhile.
      settings.put("rollcall.sweep.interval", "off");
      CompletableFuture<ServiceProcess> second =
          CompletableFuture.supplyAsync(() -> start("bench-replica-b", settings));
      ServiceProcess first = start("bench-replica-a", settings);
      services = List.of(first, second.join());
      try {
        warmUp();
        List<String> report = new ArrayList<>();
        for (int runs : sizes) {
          report.addAll(size(runs));
        }
        System.out.println();
        report.forEach(System.out::println);
      } finally {
        for (ServiceProcess s : services) {
          s.close();
        }
      }
    }
  }

  /**
   * One unmeasured recovery through each service replica first: a coordinator serves deploys for
   * weeks, so its first requests (class loading, JIT) are not what a deploy meets.
   */
  private void warmUp() throws Exception {
    // Enough pages (80 a pass, each replica serving half) for the claim path to be compiled.
    EngineMix.seed(db, 20_000, 3, EngineMix.DEPLOY_MIX);
    seedJobs = EngineMix.lastJobId(db);
    rowsReadMark = EngineMix.runsRowsRead(db);
    warmingUp = true;
    rollcall(2, 2, true);
    rollcall(2, 2, true);
    warmingUp = false;
  }

  /** Every scenario on R active runs; returns the printed report. */
  private List<String> size(int runs) throws Exception {
    EngineMix.seed(db, runs, 3, EngineMix.DEPLOY_MIX);
    seedJobs = EngineMix.lastJobId(db);
    Map<String, Long> seeded = EngineMix.seededByState(db);
    long needing = EngineMix.needing(db);
    // Every scenario meets the same settled tables: no autovacuum of the fresh seed, and no
    // checkpoint of it, runs during one scenario and not another.
    db.execute(
        "VACUUM ANALYZE workflow.workflow_runs, workflow.workflow_steps, workflow.workflow_waits,"
            + " workflow.workflow_hooks, graphile_worker._private_jobs",
        "CHECKPOINT");
    Thread.sleep(STATS_FLUSH.toMillis());
    rowsReadMark = settledRowsRead();

    Map<String, Result> results = new LinkedHashMap<>();
    if (scenarios.contains("rollcall") || scenarios.contains("client-alone")) {
      // Unmeasured passes on this seed through both service replicas: the first 100 000-run
      // pass after the small warm-up still compiled code (its service used 6.6 s of CPU, the two
      // of the next pass 2.7 s together). Replica processes alternate between the service
      // replicas, so it takes two to warm both (one went to the first only, and the second met
      // its first large pages in a measured scenario), and sixteen for the paths of a full scan
      // (claims held while the pass's scanners work, woken by the close). The claim path is still
      // compiled after these two: its methods run per page and per request, dozens of times a
      // pass, so the JIT keeps compiling them for many passes (-Dbench.warmup-passes, BENCHMARKS
      // §8; the table shows the compilers' CPU).
      warmingUp = true;
      for (int pass = 0; pass < warmupPasses; pass++) {
        rollcall(pass % 2 == 0 ? 2 : 16, 2, true);
        EngineMix.removeAddedJobs(db, seedJobs);
      }
      warmingUp = false;
      Thread.sleep(STATS_FLUSH.toMillis());
      rowsReadMark = settledRowsRead();
    }
    Result floor = medianFloor("floor", false);
    results.put("floor", floor);
    record("floor", runs, null, null, null, floor);
    // The same statement with each job keyed by its message id, as the engine keys its own jobs
    // and as Rollcall's client does: what the key alone costs graphile-worker's add_jobs. A
    // reference row. Ratios are to the floor timed just before each Rollcall pair (below); the
    // engine's, to the floor above.
    Result keyedFloor = medianFloor("floor, keyed", true);
    results.put("floor, jobs keyed as the engine keys them", keyedFloor);
    record("floor-keyed", runs, null, null, null, keyedFloor);
    for (int n : replicaCounts) {
      if (scenarios.contains("engine")) {
        results.put("engine N=" + n, engine(n));
      }
    }
    // Repetition by repetition, every size in turn (the sizes in reverse every other time), and
    // within a size the pair of one and two service replicas: the scenarios that the summaries
    // compare (two − one, the largest N − N = 1) run minutes apart at most, so a machine that
    // drifts over the run weighs on both sides of each difference alike.
    for (int k = 0; k < repeat; k++) {
      for (boolean withEngine : new boolean[] {true, false}) {
        if (!scenarios.contains(withEngine ? "rollcall" : "client-alone")) {
          continue;
        }
        List<Integer> ns = new ArrayList<>(replicaCounts);
        if (k % 2 == 1) {
          Collections.reverse(ns);
        }
        for (int n : ns) {
          // The floor again, just before the pair: the machine's speed drifts by up to twofold
          // over a run (the CPU probe's column), so a pair's ratios are to the floor of its own
          // moment, not to the one timed before every scenario.
          Result pairFloor =
              medianFloor(
                  String.format(
                      "floor before N=%d%s%s",
                      n, withEngine ? "" : ", client alone", repeat == 1 ? "" : " #" + (k + 1)),
                  false);
          String kind = kind(withEngine, equalProcesses.equals("true"));
          record("floor-before-" + kind, runs, n, null, k + 1, pairFloor);
          // Every other pair runs two service replicas first: a machine that drifts during a
          // pair then favours each side as often.
          for (int services : k % 2 == 0 ? new int[] {1, 2} : new int[] {2, 1}) {
            Result r = rollcall(n, services, withEngine);
            r.floorMillis = pairFloor.wallMillis;
            results.put(key(n, services, withEngine, k + 1), r);
            record(kind, runs, n, services, k + 1, r);
          }
          if (equalProcesses.equals("both") && n < largestN()) {
            Result bystandersFloor =
                medianFloor(
                    String.format(
                        "floor before N=%d + bystanders%s #%d",
                        n, withEngine ? "" : ", client alone", k + 1),
                    false);
            String crowd = kind(withEngine, true);
            record("floor-before-" + crowd, runs, n, null, k + 1, bystandersFloor);
            for (int services : k % 2 == 0 ? new int[] {1, 2} : new int[] {2, 1}) {
              Result r = rollcall(n, services, withEngine, true);
              r.floorMillis = bystandersFloor.wallMillis;
              results.put(withBystanders(key(n, services, withEngine, k + 1)), r);
              record(crowd, runs, n, services, k + 1, r);
            }
          }
        }
      }
    }

    List<String> out = new ArrayList<>();
    out.add(
        String.format(
            "Boot recovery of %,d active runs (%s) + %,d terminal; %,d need a re-drive:",
            runs, describe(seeded), 3L * runs, needing));
    if (equalProcesses.equals("true")) {
      out.add(
          String.format(
              "Every Rollcall scenario ran %d application processes: N replicas and %d − N"
                  + " bystanders that take no part in recovery (-Dbench.equal-processes).",
              largestN(), largestN()));
    }
    out.add("");
    out.add(
        "| scenario | wall time | last knew it was done | last jobs in | jobs added | jobs per active run | jobs per run needing one"
            + " | distinct runs | needing runs missed | jobs for runs not needing one"
            + " | runs rows read per active run | coordinator CPU | coordinator RSS"
            + " | floor just before | × floor | × floor, to the last done | × engine"
            + " | CPU probe just before |");
    out.add("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (Map.Entry<String, Result> e : results.entrySet()) {
      Result r = e.getValue();
      String key = e.getKey();
      Result engine =
          key.startsWith("rollcall")
              ? results.get("engine " + key.substring("rollcall ".length(), key.indexOf(',')))
              : null;
      out.add(
          String.format(
              "| %s | %s | %s | %s | %,d | %.2f | %.2f | %,d | %,d | %,d | %.2f | %s | %s | %.2f s"
                  + " | %.2f | %s | %s | %s |",
              key,
              r.wall(),
              r.doneMillis < 0 ? "–" : String.format("%.2f s", r.doneMillis / 1000.0),
              r.enqueuedMillis < 0 ? "–" : String.format("%.2f s", r.enqueuedMillis / 1000.0),
              r.jobs,
              (double) r.jobs / runs,
              (double) r.jobsForNeeding / needing,
              r.distinct,
              needing - r.distinctNeeding,
              r.jobs - r.jobsForNeeding,
              (double) r.rowsRead / runs,
              r.cpuMillis < 0 ? "–" : String.format("%.1f s", r.cpuMillis / 1000.0),
              r.rssMiB < 0 ? "–" : r.rssMiB + " MiB",
              r.floor(floor) / 1000.0,
              r.wallMillis / (double) r.floor(floor),
              r.doneMillis < 0
                  ? "–"
                  : String.format("%.2f", r.doneMillis / (double) r.floor(floor)),
              engine == null
                  ? "–"
                  : String.format(
                      engine.capped ? "≤ %.3f" : "%.3f", r.wallMillis / (double) engine.wallMillis),
              r.probeMillis < 0 ? "–" : r.probeMillis + " ms"));
    }
    out.add("");
    out.addAll(withinTarget(results, floor));
    out.add("Runs re-driven by seeded state (distinct runs given a job / seeded):");
    out.add("");
    out.add("| scenario | " + String.join(" | ", seeded.keySet()) + " |");
    out.add("|---|" + "---|".repeat(seeded.size()));
    for (Map.Entry<String, Result> e : results.entrySet()) {
      StringBuilder row = new StringBuilder("| " + e.getKey() + " |");
      for (Map.Entry<String, Long> s : seeded.entrySet()) {
        long[] added = e.getValue().byState.getOrDefault(s.getKey(), new long[2]);
        row.append(String.format(" %,d / %,d |", added[1], s.getValue()));
      }
      out.add(row.toString());
    }
    out.add("");
    out.add(
        "Where the coordinators' time went (requests served during the scenario, mean time each):");
    out.add("");
    out.add(
        "| scenario | registers | heartbeats | claims | completes | classification per page"
            + " | looks that found the scan full | woken by the close, answered from another's look"
            + " | CPU: coordinators | of which their JIT compilers | PostgreSQL"
            + " | replica processes | autovacuum runs |");
    out.add("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (Map.Entry<String, Result> e : results.entrySet()) {
      Map<String, Double> m = e.getValue().serviceMetrics;
      if (m.isEmpty()) {
        continue;
      }
      out.add(
          String.format(
              "| %s | %s | %s | %s | %s | %s | %,d | %,d | %s | %s | %s | %s | %d |",
              e.getKey(),
              timing(m, "http_server_requests_seconds", "/instances"),
              timing(m, "http_server_requests_seconds", "/instances/{id}/heartbeat"),
              timing(m, "http_server_requests_seconds", "/recovery/claim"),
              timing(m, "http_server_requests_seconds", "/recovery/batches/{id}/complete"),
              timing(m, "rollcall_classification_seconds", null),
              Math.round(m.getOrDefault("rollcall_claims_scan_full_total", 0.0)),
              Math.round(m.getOrDefault("rollcall_claims_looks_shared_total", 0.0)),
              coordinatorsCpu(e.getValue()),
              e.getValue().jitMillis < 0
                  ? "–"
                  : String.format("%.2f s", e.getValue().jitMillis / 1000.0),
              seconds(e.getValue().postgresCpuMillis),
              seconds(e.getValue().replicasCpuMillis),
              e.getValue().autovacuums));
    }
    out.add("");
    if (repeat > 1) {
      out.addAll(repeated(results, floor));
    }
    return out;
  }

  /**
   * A Rollcall scenario's kind in {@code -Dbench.results}: {@code rollcall} or {@code
   * client-alone}, {@code -bystanders} added when bystanders ran beside its replicas.
   */
  private static String kind(boolean withEngine, boolean withBystanders) {
    return (withEngine ? "rollcall" : "client-alone") + (withBystanders ? "-bystanders" : "");
  }

  /**
   * A measured scenario's or floor's row of {@code -Dbench.results} ({@link ResultsFile}): the
   * figures its tables print, {@code null} (an empty cell) where the scenario has none (a floor has
   * no coordinator; only a Rollcall scenario has a floor timed for it). {@code kind}: a Rollcall
   * scenario's ({@link #kind}), {@code floor} and {@code floor-keyed} (timed once per size), or
   * {@code floor-before-} and the kind of the pair it was timed for.
   */
  private static void record(
      String kind, int runs, Integer n, Integer services, Integer k, Result r) {
    ResultsFile.appendIfNamed(
        new ResultsFile.Row()
            .put("runs", runs)
            .put("kind", kind)
            .put("replicas", n)
            .put("service_replicas", services)
            .put("repetition", k)
            .put("wall_s", r.wallMillis / 1000.0)
            .put("capped", r.capped)
            .put("done_s", r.doneMillis < 0 ? null : r.doneMillis / 1000.0)
            .put("floor_s", r.floorMillis < 0 ? null : r.floorMillis / 1000.0)
            .put("rows_read_per_run", r.rowsRead / (double) runs)
            .put("coordinator_cpu_s", r.cpuMillis < 0 ? null : r.cpuMillis / 1000.0)
            .put("coordinator_rss_mib", r.rssMiB < 0 ? null : r.rssMiB)
            .put("postgres_cpu_s", r.postgresCpuMillis < 0 ? null : r.postgresCpuMillis / 1000.0));
  }

  /**
   * The target "≤ 2.5 × the floor", counted per size over every Rollcall scenario, each against the
   * floor timed just before its pair: by the wall time and by the last replica's "done".
   */
  private List<String> withinTarget(Map<String, Result> results, Result first) {
    List<String> out = new ArrayList<>();
    for (int n : replicaCounts) {
      for (boolean withEngine : new boolean[] {true, false}) {
        List<Double> byWall = new ArrayList<>();
        List<Double> byDone = new ArrayList<>();
        for (int k = 1; k <= repeat; k++) {
          for (int services = 1; services <= 2; services++) {
            Result r = results.get(key(n, services, withEngine, k));
            if (r == null) {
              continue;
            }
            byWall.add(r.wallMillis / (double) r.floor(first));
            if (r.doneMillis >= 0) {
              byDone.add(r.doneMillis / (double) r.floor(first));
            }
          }
        }
        if (byWall.isEmpty()) {
          continue;
        }
        out.add(
            String.format(
                "N=%d%s: ≤ 2.5 × the floor just before, %d of %d by the wall time (%s),"
                    + " %d of %d by the last done (%s).",
                n,
                withEngine ? ", world" : ", client alone",
                byWall.stream().filter(x -> x <= 2.5).count(),
                byWall.size(),
                range(byWall),
                byDone.stream().filter(x -> x <= 2.5).count(),
                byDone.size(),
                range(byDone)));
      }
    }
    if (!out.isEmpty()) {
      out.add("");
    }
    return out;
  }

  /** "1.52–2.31 ×" of ratios; "–" of none. */
  private static String range(List<Double> ratios) {
    if (ratios.isEmpty()) {
      return "–";
    }
    double lo = ratios.stream().mapToDouble(Double::doubleValue).min().orElseThrow();
    double hi = ratios.stream().mapToDouble(Double::doubleValue).max().orElseThrow();
    return String.format("%.2f–%.2f ×", lo, hi);
  }

  /**
   * With {@code -Dbench.repeat=K}: each pair of scenarios (one and two service replicas, same N and
   * kind) side by side, the difference of each pair, and each scenario's median against the floor.
   */
  private List<String> repeated(Map<String, Result> results, Result floor) {
    List<String> out = new ArrayList<>();
    out.add(
        String.format(
            "Repeated pairs (%d of each; wall time, in seconds; a pair's two scenarios ran one after"
                + " the other, every other pair two service replicas first):",
            repeat));
    out.add("");
    out.add(
        "| scenario | one service replica | two service replicas | two − one, each pair"
            + " | pairs where two were no slower | median two − one"
            + " | medians, × the floor just before |");
    out.add("|---|---|---|---|---|---|---|");
    // Every pair's two − one, over all scenarios: the target "two service replicas no slower".
    List<Double> allPairs = new ArrayList<>();
    for (int n : replicaCounts) {
      for (boolean withEngine : new boolean[] {true, false}) {
        List<Long> one = new ArrayList<>();
        List<Long> two = new ArrayList<>();
        // Each scenario's wall against its own pair's floor, in thousandths (for median()).
        List<Long> oneRatio = new ArrayList<>();
        List<Long> twoRatio = new ArrayList<>();
        for (int k = 1; k <= repeat; k++) {
          Result a = results.get(key(n, 1, withEngine, k));
          Result b = results.get(key(n, 2, withEngine, k));
          if (a != null && b != null) {
            one.add(a.wallMillis);
            two.add(b.wallMillis);
            oneRatio.add(Math.round(1000.0 * a.wallMillis / a.floor(floor)));
            twoRatio.add(Math.round(1000.0 * b.wallMillis / b.floor(floor)));
          }
        }
        if (one.isEmpty()) {
          continue;
        }
        List<Long> diff = new ArrayList<>();
        for (int k = 0; k < one.size(); k++) {
          diff.add(two.get(k) - one.get(k));
        }
        diff.forEach(d -> allPairs.add(d / 1000.0));
        out.add(
            String.format(
                "| N=%d%s | %s | %s | %s | %d of %d | %+.2f s | %.2f / %.2f |",
                n,
                withEngine ? ", world" : ", client alone",
                walls(one),
                walls(two),
                diff.stream().map(d -> String.format("%+.2f", d / 1000.0)).toList(),
                diff.stream().filter(d -> d <= 0).count(),
                diff.size(),
                median(diff) / 1000.0,
                median(oneRatio) / 1000.0,
                median(twoRatio) / 1000.0));
      }
    }
    out.add("");
    if (!allPairs.isEmpty()) {
      out.add(
          "Two service replicas − one, every pair of every scenario above (s): "
              + PairedDifferences.of(allPairs).describe()
              + ".");
    }
    out.addAll(largestAgainstOne(results, floor));
    out.addAll(bystandersSplit(results, floor));
    out.add("");
    return out;
  }

  /**
   * The target "wall at the largest N ≤ wall at N = 1": for each repetition, kind and number of
   * service replicas, the largest N's wall minus N = 1's, and their mean with its 95 % interval.
   * Those two scenarios did not run one right after the other, so machine drift between them is in
   * these differences; the same differences of the walls as multiples of each pair's own floor
   * follow, with that drift divided out as far as the floor moves with it.
   */
  private List<String> largestAgainstOne(Map<String, Result> results, Result floor) {
    int largest = largestN();
    if (largest == 1 || !replicaCounts.contains(1)) {
      return List.of();
    }
    List<String> out = new ArrayList<>();
    List<Double> all = new ArrayList<>();
    for (boolean withEngine : new boolean[] {true, false}) {
      List<Double> diffs = new ArrayList<>();
      List<Double> ratioDiffs = new ArrayList<>();
      for (int services = 1; services <= 2; services++) {
        for (int k = 1; k <= repeat; k++) {
          Result big = results.get(key(largest, services, withEngine, k));
          Result single = results.get(key(1, services, withEngine, k));
          if (big != null && single != null) {
            diffs.add((big.wallMillis - single.wallMillis) / 1000.0);
            ratioDiffs.add(
                big.wallMillis / (double) big.floor(floor)
                    - single.wallMillis / (double) single.floor(floor));
          }
        }
      }
      if (diffs.isEmpty()) {
        continue;
      }
      all.addAll(diffs);
      String kind = withEngine ? "world" : "client alone";
      out.add(pairs(String.format("N=%d − N=1, %s", largest, kind), "s", diffs) + ".");
      out.add(
          pairs(
                  String.format(
                      "N=%d − N=1, %s, as multiples of each one's floor just before",
                      largest, kind),
                  "×",
                  ratioDiffs)
              + ".");
    }
    if (!all.isEmpty()) {
      out.add(
          String.format(
              "N=%d − N=1, every pair (s): %s.", largest, PairedDifferences.of(all).describe()));
    }
    return out;
  }

  /**
   * Tells {@code toLeave} to leave once every one of {@code replicas} has reported {@code event},
   * or once one of them ended without it (the race then fails), so that none waits on.
   */
  private static void leaveOnceAll(
      List<NodeReplica> replicas, String event, List<NodeReplica> toLeave, String threadName) {
    Thread leaver =
        new Thread(
            () -> {
              try {
                for (NodeReplica replica : replicas) {
                  replica.await(event, Duration.ofMinutes(10));
                }
              } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
              } catch (IllegalStateException ended) {
                // reported by the race
              }
              toLeave.forEach(replica -> replica.send("leave"));
            },
            threadName);
    leaver.setDaemon(true);
    leaver.start();
  }

  /** "label, each pair [+0.53, −0.11] (unit): n = 2, mean …": paired differences and summary. */
  private static String pairs(String label, String unit, List<Double> diffs) {
    return String.format(
        "%s, each pair %s (%s): %s",
        label,
        diffs.stream().map(d -> String.format("%+.2f", d)).toList(),
        unit,
        PairedDifferences.of(diffs).describe());
  }

  private int largestN() {
    return replicaCounts.stream().mapToInt(Integer::intValue).max().orElse(1);
  }

  /** The key of the same scenario run with bystanders up to the largest N. */
  private String withBystanders(String key) {
    int hash = key.indexOf(" #");
    String suffix = " + " + (largestN() - 1) + " bystanders";
    return hash < 0 ? key + suffix : key.substring(0, hash) + suffix + key.substring(hash);
  }

  /**
   * With {@code -Dbench.equal-processes=both}: the largest N − N = 1 split in two, paired within
   * each repetition and number of service replicas: (N = 1 + bystanders) − N = 1, what the other
   * processes cost by running; largest N − (N = 1 + bystanders), what Rollcall's work at the
   * largest N adds to as many processes. In seconds and as multiples of each one's floor.
   */
  private List<String> bystandersSplit(Map<String, Result> results, Result floor) {
    if (!equalProcesses.equals("both") || largestN() == 1 || !replicaCounts.contains(1)) {
      return List.of();
    }
    List<String> out = new ArrayList<>();
    for (boolean withEngine : new boolean[] {true, false}) {
      List<Double> running = new ArrayList<>();
      List<Double> runningX = new ArrayList<>();
      List<Double> work = new ArrayList<>();
      List<Double> workX = new ArrayList<>();
      for (int services = 1; services <= 2; services++) {
        for (int k = 1; k <= repeat; k++) {
          Result single = results.get(key(1, services, withEngine, k));
          Result crowd = results.get(withBystanders(key(1, services, withEngine, k)));
          Result big = results.get(key(largestN(), services, withEngine, k));
          if (single == null || crowd == null || big == null) {
            continue;
          }
          running.add((crowd.wallMillis - single.wallMillis) / 1000.0);
          work.add((big.wallMillis - crowd.wallMillis) / 1000.0);
          runningX.add(
              crowd.wallMillis / (double) crowd.floor(floor)
                  - single.wallMillis / (double) single.floor(floor));
          workX.add(
              big.wallMillis / (double) big.floor(floor)
                  - crowd.wallMillis / (double) crowd.floor(floor));
        }
      }
      if (running.isEmpty()) {
        continue;
      }
      String kind = withEngine ? "world" : "client alone";
      String crowd = String.format("N=1 + %d bystanders", largestN() - 1);
      out.add(
          pairs(String.format("(%s) − N=1, %s", crowd, kind), "s", running)
              + "; as multiples of each one's floor: "
              + PairedDifferences.of(runningX).describe()
              + ".");
      out.add(
          pairs(String.format("N=%d − (%s), %s", largestN(), crowd, kind), "s", work)
              + "; as multiples of each one's floor: "
              + PairedDifferences.of(workX).describe()
              + ".");
    }
    return out;
  }

  /**
   * A Rollcall scenario's row in the report: "rollcall N=16, 2 replicas, client alone", with " #k"
   * when scenarios repeat ({@code -Dbench.repeat}). Rows of the engine's scenarios match it up to
   * the first comma.
   */
  private String key(int n, int services, boolean withEngine, int k) {
    return String.format(
        "rollcall N=%d, %d replica%s%s%s",
        n,
        services,
        services == 1 ? "" : "s",
        withEngine ? "" : ", client alone",
        repeat == 1 ? "" : " #" + k);
  }

  private static String walls(List<Long> millis) {
    return millis.stream().map(ms -> String.format("%.2f", ms / 1000.0)).toList().toString();
  }

  /** The median; of an even count, the mean of the two middle values. */
  private static double median(List<Long> values) {
    List<Long> sorted = values.stream().sorted().toList();
    int m = sorted.size() / 2;
    return sorted.size() % 2 == 1 ? sorted.get(m) : (sorted.get(m - 1) + sorted.get(m)) / 2.0;
  }

  private static Map<String, Double> serviceMetrics(List<ServiceProcess> coordinators) {
    Map<String, Double> sum = new java.util.TreeMap<>();
    for (ServiceProcess s : coordinators) {
      s.metrics("http_server_requests_seconds_", List.of("uri"))
          .forEach((k, v) -> sum.merge(k, v, Double::sum));
      s.metrics("rollcall_classification_seconds_", List.of())
          .forEach((k, v) -> sum.merge(k, v, Double::sum));
      s.metrics("rollcall_claims_scan_full_total", List.of())
          .forEach((k, v) -> sum.merge(k, v, Double::sum));
      s.metrics("rollcall_claims_looks_shared_total", List.of())
          .forEach((k, v) -> sum.merge(k, v, Double::sum));
    }
    return sum;
  }

  /** The coordinators' CPU, and each one's part when there are several: "0.8 s (0.5 + 0.3)". */
  private static String coordinatorsCpu(Result r) {
    if (r.cpuEach.length < 2) {
      return seconds(r.cpuMillis);
    }
    return String.format(
        "%s (%s)",
        seconds(r.cpuMillis),
        String.join(
            " + ",
            java.util.Arrays.stream(r.cpuEach)
                .mapToObj(ms -> String.format("%.2f", ms / 1000.0))
                .toList()));
  }

  private static String seconds(long millis) {
    return millis < 0 ? "–" : String.format("%.1f s", millis / 1000.0);
  }

  /** "n × mean ms" of a timer in a metrics delta; {@code uri} null for an unlabelled timer. */
  private static String timing(Map<String, Double> m, String timer, String uri) {
    String labels = uri == null ? "" : "{uri=\"" + uri + "\"}";
    double count = m.getOrDefault(timer + "_count" + labels, 0.0);
    double seconds = m.getOrDefault(timer + "_sum" + labels, 0.0);
    return count < 0.5
        ? "–"
        : String.format("%,d × %.1f ms", Math.round(count), 1000 * seconds / count);
  }

  /** What one scenario did. */
  private static final class Result {
    long wallMillis; // from "go" until every replica process has exited
    long doneMillis = -1; // from "go" until the last replica knew its recovery was over
    long enqueuedMillis = -1; // from "go" until the last batch's jobs were in the queue
    boolean capped;
    long jobs;
    long jobsForNeeding;
    long distinct;
    long distinctNeeding;
    long rowsRead;
    long cpuMillis = -1; // the coordinators together
    long[] cpuEach = {}; // each coordinator's part, in the order the replica processes alternate
    // Each coordinator's CPU by thread ({@link Cpu#usedByName}), and the JIT compilers' part of
    // all.
    List<String> threads = new ArrayList<>();
    long jitMillis = -1;
    long postgresCpuMillis = -1; // every PostgreSQL process, during the scenario
    long replicasCpuMillis = -1; // the replica processes, from "go" to their result
    long rssMiB = -1;
    long autovacuums = -1; // autovacuum's vacuums and analyzes that finished during the scenario
    long probeMillis = -1; // the machine's speed just before ({@link #probe})
    long floorMillis = -1; // the floor timed just before this scenario's pair; -1: none
    Map<String, long[]> byState;
    Map<String, Double> serviceMetrics = Map.of(); // what the coordinators counted meanwhile

    String wall() {
      return (capped ? "> " : "") + String.format("%.2f s", wallMillis / 1000.0);
    }

    /** The floor this scenario's ratios are to: its pair's own, else the run's first. */
    long floor(Result first) {
      return floorMillis > 0 ? floorMillis : first.wallMillis;
    }
  }

  /**
   * PostgreSQL's CPU since {@code before}, read once the backends of connections just closed (the
   * floor's, the replica processes') have exited: their time reaches the postmaster's reaped
   * children's only once the postmaster has waited for them. Read at once, it missed them.
   */
  private static long postgresCpuSince(long before) throws InterruptedException {
    Thread.sleep(500);
    return Cpu.postgres() - before;
  }

  /**
   * The floor is one statement, so one slow moment of the machine moves it much: the median of
   * three, each printed.
   */
  private Result medianFloor(String label, boolean keyed) throws Exception {
    List<Result> floors = new ArrayList<>();
    for (int k = 0; k < 3; k++) {
      floors.add(floor(keyed));
    }
    System.out.printf(
        "%s: %s s; the median counts (PostgreSQL CPU %s s)%n",
        label,
        floors.stream().map(f -> String.format("%.2f", f.wallMillis / 1000.0)).toList(),
        floors.stream().map(f -> String.format("%.2f", f.postgresCpuMillis / 1000.0)).toList());
    floors.sort(java.util.Comparator.comparingLong(f -> f.wallMillis));
    return floors.get(1);
  }

  /**
   * The lower bound: one statement enqueues exactly the runs without a live wake-up job; {@code
   * keyed}, each job with its message id as its key, as the engine and Rollcall's client add them.
   */
  private Result floor(boolean keyed) throws Exception {
    Result r = new Result();
    r.probeMillis = probe();
    long postgresBefore = Cpu.postgres();
    long t0 = System.nanoTime();
    db.execute(
        "SELECT count(*) FROM graphile_worker.add_jobs(ARRAY("
            + "SELECT json_populate_record(NULL::graphile_worker.job_spec, json_build_object("
            + " 'identifier', 'workflow_flows', 'max_attempts', 3,"
            + (keyed ? " 'job_key', 'msg_floor_' || r.id," : "")
            + " 'payload', json_build_object("
            + "  'attempt', 1, 'messageId', 'msg_floor_' || r.id, 'id', r.name, 'data',"
            + "  encode(convert_to('{\"runId\":\"' || r.id || '\"}', 'UTF8'), 'base64'))))"
            + " FROM workflow.workflow_runs r WHERE r.status IN ('pending', 'running')"
            + " AND NOT EXISTS (SELECT 1 FROM graphile_worker._private_jobs j"
            + "  WHERE j.task_id = (SELECT id FROM graphile_worker._private_tasks"
            + "   WHERE identifier = 'workflow_flows')"
            + "  AND j.attempts < j.max_attempts"
            + "  AND (j.locked_at IS NULL OR j.locked_at > now() - interval '4 hours')"
            + "  AND convert_from(decode(j.payload->>'data', 'base64'), 'UTF8')::json->>'runId'"
            + "   = r.id)))");
    r.wallMillis = (System.nanoTime() - t0) / 1_000_000;
    r.doneMillis = r.wallMillis;
    r.postgresCpuMillis = postgresCpuSince(postgresBefore);
    return measured(r, List.of());
  }

  /** N replicas of the published engine, each running its own boot recovery. */
  private Result engine(int n) throws Exception {
    List<NodeReplica> replicas = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      replicas.add(
          NodeReplica.start("bench-engine-" + i, db, Map.of("mode", "engine", "waitForGo", true)));
    }
    return race("engine N=" + n, replicas, engineCap, List.of());
  }

  /**
   * N replicas with the Rollcall client, spread over {@code serviceCount} service replicas. With
   * {@code withEngine} each replica also starts the engine's world (without its recovery), as an
   * application does; its queue then waits for an executor that never listens, trying two loopback
   * connections every 50 ms. Without it the replica runs the client and its enqueuer alone.
   */
  private Result rollcall(int n, int serviceCount, boolean withEngine) throws Exception {
    return rollcall(n, serviceCount, withEngine, equalProcesses.equals("true"));
  }

  private Result rollcall(int n, int serviceCount, boolean withEngine, boolean withBystanders)
      throws Exception {
    String deploymentId = "bench-" + UUID.randomUUID();
    List<NodeReplica> replicas = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      Map<String, Object> config = new HashMap<>();
      config.put("mode", "rollcall");
      config.put("waitForGo", true);
      config.put("url", services.get(i % serviceCount).base().toString());
      config.put("namespace", NAMESPACE);
      config.put("secret", SECRET);
      config.put("deploymentId", deploymentId);
      if (batch != null) {
        config.put("maxRuns", batch);
      }
      config.put("withoutEngine", !withEngine);
      config.put("stayAlive", stay);
      replicas.add(NodeReplica.start("bench-rollcall-" + i, db, config));
    }
    List<NodeReplica> bystanders = new ArrayList<>();
    for (int i = n; withBystanders && !warmingUp && i < largestN(); i++) {
      bystanders.add(
          NodeReplica.start(
              BYSTANDER + i,
              db,
              Map.of("mode", "bystander", "waitForGo", true, "withoutEngine", !withEngine)));
    }
    if (!bystanders.isEmpty()) {
      leaveOnceAll(replicas, "done", bystanders, "bench-bystanders-leave");
    }
    if (stay) {
      leaveOnceAll(replicas, "recovered", replicas, "bench-leave-when-all-done");
    }
    String scenario =
        String.format(
            "rollcall N=%d, %d service replicas%s%s",
            n,
            serviceCount,
            withEngine ? "" : ", client alone",
            bystanders.isEmpty() ? "" : ", " + bystanders.size() + " bystanders");
    statements.reset();
    List<NodeReplica> processes = new ArrayList<>(replicas);
    processes.addAll(bystanders);
    Result r =
        race(
            warmingUp ? null : scenario,
            processes,
            Duration.ofMinutes(10),
            services.subList(0, serviceCount));
    statements.print(scenario);
    // How long after the deploy's epoch closed (by the database's clock) the last replica knew.
    long closedAt =
        Long.parseLong(
            db.column(
                    "SELECT (extract(epoch FROM closed_at) * 1000)::bigint FROM rollcall.epochs"
                        + " WHERE kind = 'boot' AND deployment_id = ?",
                    deploymentId)
                .get(0));
    long[] knew =
        replicas.stream()
            .flatMap(replica -> replica.events("done").stream())
            .mapToLong(e -> e.path("t").asLong() - closedAt)
            .sorted()
            .toArray();
    if (serviceCount > 1) {
      // When each replica knew, by the service replica it claims from (replica i uses i % count).
      for (int s = 0; s < serviceCount; s++) {
        List<Long> byService = new ArrayList<>();
        for (int i = s; i < replicas.size(); i += serviceCount) {
          replicas
              .get(i)
              .events("done")
              .forEach(e -> byService.add(e.path("t").asLong() - closedAt));
        }
        java.util.Collections.sort(byService);
        System.out.printf(
            "rollcall N=%d: replicas of service replica %d knew after %s ms%n", n, s, byService);
      }
    }
    System.out.printf(
        "rollcall N=%d, %d replicas%s: the last replica learnt the pass was done %d ms after it"
            + " closed (the first %d ms, the median %d ms%s; load average %s)%n",
        n,
        serviceCount,
        stay ? " (leaving once all knew)" : "",
        knew[knew.length - 1],
        knew[0],
        knew[knew.length / 2],
        closeCommitted(deploymentId)
            .map(
                ms ->
                    String.format("; the close committed %d ms after its closed_at", ms - closedAt))
            .orElse(""),
        loadAverage());
    for (int s = 0; s < r.threads.size(); s++) {
      System.out.printf(
          "rollcall N=%d, %d replicas: service replica %d's CPU by thread: %s%n",
          n, serviceCount, s, r.threads.get(s));
    }
    return r;
  }

  /**
   * When the transaction that closed the deploy's boot epoch committed (ms since the epoch), where
   * the database keeps commit timestamps ({@code track_commit_timestamp = on}): {@code closed_at}
   * is that transaction's start, and it may wait for the epoch's lock before it closes.
   */
  private java.util.Optional<Long> closeCommitted(String deploymentId) {
    try {
      return java.util.Optional.of(
          Long.parseLong(
              db.column(
                      "SELECT (extract(epoch FROM pg_xact_commit_timestamp(xmin)) * 1000)::bigint"
                          + " FROM rollcall.epochs WHERE kind = 'boot' AND deployment_id = ?",
                      deploymentId)
                  .get(0)));
    } catch (RuntimeException notKept) {
      return java.util.Optional.empty();
    }
  }

  private static String loadAverage() {
    try {
      return java.nio.file.Files.readString(java.nio.file.Path.of("/proc/loadavg")).trim();
    } catch (java.io.IOException e) {
      return "unknown";
    }
  }

  /** Starts every replica's recovery at once and waits for all of them (or the cap). */
  private Result race(
      String label, List<NodeReplica> replicas, Duration cap, List<ServiceProcess> coordinators)
      throws Exception {
    Result r = new Result();
    SystemProfile.Recording recording = null;
    try {
      for (NodeReplica replica : replicas) {
        replica.await("ready", Duration.ofMinutes(2));
      }
      r.probeMillis = probe();
      // Label null: an unmeasured pass, not recorded.
      recording = label == null ? null : system.start(label);
      long[] cpuBefore = coordinators.stream().mapToLong(ServiceProcess::cpuMillis).toArray();
      List<Map<Long, Cpu.ThreadTime>> threadsBefore =
          coordinators.stream().map(ServiceProcess::threads).toList();
      long postgresBefore = Cpu.postgres();
      long autovacuumsBefore = autovacuums();
      Map<String, Double> metricsBefore = serviceMetrics(coordinators);
      long t0 = System.nanoTime();
      long goAt = System.currentTimeMillis();
      for (NodeReplica replica : replicas) {
        replica.send("go");
      }
      long deadline = t0 + cap.toNanos();
      for (NodeReplica replica : replicas) {
        long left = Math.max(1, (deadline - System.nanoTime()) / 1_000_000);
        try {
          int exit = replica.waitFor(Duration.ofMillis(left));
          if (exit != 0) {
            throw new IllegalStateException(
                replica.name() + " failed with exit " + exit + "; see target/it-logs");
          }
          replica.await("result", Duration.ofSeconds(5));
        } catch (IllegalStateException stillRunning) {
          if (replica.isAlive()) {
            r.capped = true;
            break;
          }
          throw stillRunning;
        }
      }
      r.wallMillis = r.capped ? cap.toMillis() : (System.nanoTime() - t0) / 1_000_000;
      if (recording != null) {
        recording.stop();
      }
      r.doneMillis = r.capped ? -1 : lastDone(replicas, goAt);
      r.autovacuums = autovacuums() - autovacuumsBefore;
      // Rollcall replicas report each batch once its jobs are in; the rest is learning "done".
      r.enqueuedMillis =
          replicas.stream()
              .flatMap(replica -> replica.events("batch").stream())
              .mapToLong(e -> e.path("t").asLong() - goAt)
              .max()
              .orElse(-1);
      // What each replica process used from "go" until it had its result.
      r.replicasCpuMillis =
          replicas.stream()
              .flatMap(replica -> replica.events("result").stream())
              .mapToLong(e -> e.path("cpuMs").asLong())
              .sum();
      if (!coordinators.isEmpty()) {
        r.cpuEach = new long[coordinators.size()];
        r.jitMillis = 0;
        for (int i = 0; i < r.cpuEach.length; i++) {
          r.cpuEach[i] = coordinators.get(i).cpuMillis() - cpuBefore[i];
          Map<String, Long> used =
              Cpu.usedByName(threadsBefore.get(i), coordinators.get(i).threads());
          r.threads.add(
              used.entrySet().stream()
                  .filter(e -> e.getValue() >= 20)
                  .map(e -> String.format("%s %.2f s", e.getKey(), e.getValue() / 1000.0))
                  .collect(java.util.stream.Collectors.joining(", ")));
          r.jitMillis +=
              used.entrySet().stream()
                  .filter(e -> e.getKey().matches("C[12] CompilerThre"))
                  .mapToLong(Map.Entry::getValue)
                  .sum();
        }
        r.cpuMillis = java.util.Arrays.stream(r.cpuEach).sum();
        r.postgresCpuMillis = postgresCpuSince(postgresBefore);
        r.rssMiB = coordinators.stream().mapToLong(ServiceProcess::residentMiB).sum();
        Map<String, Double> delta = new java.util.TreeMap<>(serviceMetrics(coordinators));
        metricsBefore.forEach((k, v) -> delta.merge(k, -v, Double::sum));
        r.serviceMetrics = delta;
      }
    } finally {
      if (recording != null) {
        recording.stop();
      }
      for (NodeReplica replica : replicas) {
        replica.close();
      }
    }
    return measured(r, coordinators);
  }

  /**
   * When the last replica knew that its recovery was over, in ms from {@code goAt}: a Rollcall
   * replica's "done" (it learnt that the deploy's pass is closed), an engine replica's "result"
   * (its re-enqueue returned). The wall time goes on until every replica process has exited: a
   * Rollcall replica leaves the service, closes its pool and the engine's world, then exits; the
   * engine's closes its world and exits. A deploy's replicas stay up and pay none of that during
   * the deploy, so the wall time is the conservative figure and this one the deploy's own. Both
   * clocks are the machine's wall clock (the replica's {@code Date.now()}).
   */
  private static long lastDone(List<NodeReplica> replicas, long goAt) {
    long last = -1;
    for (NodeReplica replica : replicas) {
      if (replica.name().startsWith(BYSTANDER)) {
        continue; // it knows nothing of the pass; its "result" is its leave
      }
      List<JsonNode> done = replica.events("done");
      for (var e : done.isEmpty() ? replica.events("result") : done) {
        last = Math.max(last, e.path("t").asLong() - goAt);
      }
    }
    return last;
  }

  /**
   * Reads the runs-table statistics once every backend has published them, then counts what the
   * scenario added and removes it, so the next scenario starts from the seed. The counting reads
   * the runs table too; the next scenario's mark is taken after it.
   */
  private Result measured(Result r, List<ServiceProcess> coordinators) throws Exception {
    Thread.sleep(STATS_FLUSH.toMillis());
    r.rowsRead = EngineMix.runsRowsRead(db) - rowsReadMark;
    r.byState = EngineMix.addedByState(db, seedJobs);
    for (Map.Entry<String, long[]> e : r.byState.entrySet()) {
      r.jobs += e.getValue()[0];
      r.distinct += e.getValue()[1];
      if (EngineMix.STATES.getOrDefault(e.getKey(), false)) {
        r.jobsForNeeding += e.getValue()[0];
        r.distinctNeeding += e.getValue()[1];
      }
    }
    EngineMix.removeAddedJobs(db, seedJobs);
    settle();
    rowsReadMark = settledRowsRead();
    return r;
  }

  /**
   * Vacuums and analyzes the database and checkpoints, so that the next scenario meets settled
   * tables as the first one does: the jobs a scenario added (and this cleanup deleted), and the
   * ledger and batch rows it wrote, would otherwise be vacuumed by autovacuum, or written out by a
   * checkpoint, during whichever scenario comes next. The scenarios of one size always run in the
   * same order (N = 1 before N = 16, one service replica before two), so that work fell on the
   * later ones.
   */
  private void settle() {
    if (settleBetween) {
      db.execute("VACUUM ANALYZE", "CHECKPOINT");
    }
  }

  /**
   * How fast the machine is right now: the median of three runs of a fixed CPU-bound statement, in
   * ms. Taken before the floor and before each scenario: the same code on this shared machine has
   * run a scenario 1.6 times slower some minutes later, with every request and every party's CPU
   * slower alike, so a ratio to a floor measured earlier can carry that drift.
   */
  private long probe() {
    long[] ms = new long[3];
    for (int i = 0; i < ms.length; i++) {
      long t0 = System.nanoTime();
      db.column("SELECT sum(g)::text FROM generate_series(1, 3000000) g");
      ms[i] = (System.nanoTime() - t0) / 1_000_000;
    }
    Arrays.sort(ms);
    return ms[1];
  }

  /** Vacuums and analyzes autovacuum has finished so far, on every table of the database. */
  private long autovacuums() {
    return Long.parseLong(
        db.column(
                "SELECT coalesce(sum(autovacuum_count + autoanalyze_count), 0)::bigint"
                    + " FROM pg_stat_all_tables")
            .get(0));
  }

  /** The runs-table rows read so far, once this test's own (closed) connections have reported. */
  private long settledRowsRead() throws InterruptedException {
    long last = EngineMix.runsRowsRead(db);
    for (int i = 0; i < 20; i++) {
      Thread.sleep(500);
      long now = EngineMix.runsRowsRead(db);
      if (now == last) {
        return now;
      }
      last = now;
    }
    return last;
  }

  private ServiceProcess start(String name, Map<String, String> settings) {
    try {
      return ServiceProcess.start(name, db, settings);
    } catch (Exception e) {
      throw new IllegalStateException(name + " did not start", e);
    }
  }

  private static String describe(Map<String, Long> seeded) {
    StringBuilder s = new StringBuilder();
    seeded.forEach(
        (k, v) -> s.append(s.length() == 0 ? "" : ", ").append(String.format("%s %,d", k, v)));
    return s.toString();
  }

  private static List<Integer> ints(String csv) {
    return Arrays.stream(csv.split(",")).map(String::trim).map(Integer::valueOf).toList();
  }
}
