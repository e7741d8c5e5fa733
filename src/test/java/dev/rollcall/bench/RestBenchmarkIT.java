package dev.rollcall.bench;

import dev.rollcall.testing.ServiceProcess;
import dev.rollcall.testing.TestDatabase;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * What a service costs at rest: {@code bench.namespaces} (100) table-source namespaces, each over a
 * runs table of its own with a few active runs, no traffic, watched for {@code bench.seconds} (40)
 * after {@code bench.warmup-seconds} (20). No instance, unless {@code bench.idle-instances} (N, 0)
 * says: N instances of the first namespace, registered before the warm-up once their deployment's
 * boot pass was worked to its end, that heartbeat at the default interval (3 s) with an empty
 * in-flight set, as idle clients do, and do nothing else ({@link SimulatedFleet#idle}). Prints the
 * service's CPU (share of one core), PostgreSQL's transactions per second (all of them, and per
 * namespace), the service's resident memory, and which of Rollcall's tables the idle work read or
 * wrote (from {@code pg_stat_user_tables}), so that a regression names its source. Targets: under 2
 * % of a core and at most one transaction per second per namespace. Run with {@code bench/run
 * rest}; {@code -Dbench.results=FILE} appends the figures as a CSV row ({@link ResultsFile}).
 */
@Tag("benchmark")
class RestBenchmarkIT {

  /** The idle instances' heartbeat interval: the service's default. */
  private static final long IDLE_HEARTBEAT_MS = 3000;

  @Test
  void aServiceWithManyNamespacesAndNoTrafficCostsAlmostNothing() throws Exception {
    int namespaces = Integer.getInteger("bench.namespaces", 100);
    int seconds = Integer.getInteger("bench.seconds", 40);
    int warmup = Integer.getInteger("bench.warmup-seconds", 20);
    int idle = Integer.getInteger("bench.idle-instances", 0);
    if (idle > 0 && namespaces < 1) {
      throw new IllegalArgumentException("bench.idle-instances needs a namespace to register in");
    }
    try (TestDatabase db = TestDatabase.start()) {
      Map<String, String> settings = new HashMap<>();
      db.execute("CREATE SCHEMA rest");
      for (int i = 0; i < namespaces; i++) {
        String ns = "ns" + i;
        db.execute(
            "CREATE TABLE rest."
                + ns
                + " (id text PRIMARY KEY, workflow_name text NOT NULL, status text NOT NULL)",
            "INSERT INTO rest."
                + ns
                + " SELECT 'run_' || n, 'flow', CASE WHEN n % 4 = 0 THEN 'completed'"
                + " ELSE 'running' END FROM generate_series(1, 20) n");
        String p = "rollcall.namespaces.\"" + ns + "\".";
        settings.put(p + "registration-secret", "secret-" + ns);
        settings.put(p + "source.kind", "table");
        settings.put(p + "source.schema", "rest");
        settings.put(p + "source.table", ns);
        settings.put(p + "source.id-column", "id");
        settings.put(p + "source.status-column", "status");
        settings.put(p + "source.active-statuses", "running");
        settings.put(p + "source.name-column", "workflow_name");
        settings.put(p + "source.queue-name-template", "q_{name}");
      }
      try (ServiceProcess service = ServiceProcess.start("rest", db, settings);
          SimulatedFleet fleet =
              SimulatedFleet.idle(service.base(), "ns0", "idle", idle, IDLE_HEARTBEAT_MS)) {
        Thread.sleep(warmup * 1000L);
        Snapshot before = Snapshot.of(db, service);
        long beatsBefore = fleet.answered();
        Thread.sleep(seconds * 1000L);
        Snapshot after = Snapshot.of(db, service);
        long beats = fleet.answered() - beatsBefore;
        double elapsedS = (after.atNanos - before.atNanos) / 1e9;
        double cpu = (after.cpuMs - before.cpuMs) / 10.0 / elapsedS;
        double tps = (after.transactions - before.transactions) / elapsedS;
        long rss = service.residentMiB();
        System.out.printf(
            "%nAt rest: %d table-source namespaces, %d idle instances, no other traffic, %.0f s"
                + " measured after %d s (%d cores, load %s, %s)%n",
            namespaces,
            idle,
            elapsedS,
            warmup,
            Runtime.getRuntime().availableProcessors(),
            Latencies.loadAverage(),
            db.origin());
        System.out.printf(
            "| service CPU (%% of a core) | database transactions/s | per namespace/s | service"
                + " RSS (MiB) |%n|---|---|---|---|%n| %.2f | %.1f | %.3f | %d |%n",
            cpu, tps, tps / namespaces, rss);
        if (idle > 0) {
          System.out.printf(
              "idle instances: %s; %.1f heartbeats/s answered in the window%n",
              fleet.describe(), beats / elapsedS);
        }
        ResultsFile.appendIfNamed(
            new ResultsFile.Row()
                .put("namespaces", namespaces)
                .put("idle_instances", idle)
                .put("seconds", elapsedS)
                .put("warmup_seconds", warmup)
                .put("service_cpu_pct", cpu)
                .put("transactions_per_s", tps)
                .put("transactions_per_s_per_namespace", tps / namespaces)
                .put("service_rss_mib", rss)
                .put("idle_heartbeats_per_s", beats / elapsedS)
                .put("idle_heartbeat_errors", fleet.errors()));
        System.out.printf(
            "target under 2 %% of a core: %s; target at most 1 transaction/s per namespace: %s%n",
            cpu < 2 ? "met" : "missed", tps / namespaces <= 1 ? "met" : "missed");
        System.out.printf(
            "%nRollcall's tables touched at rest, per second:%n| table | scans | rows read |"
                + " rows written |%n|---|---|---|---|%n");
        for (Map.Entry<String, long[]> e : after.tables.entrySet()) {
          long[] a = e.getValue();
          long[] b = before.tables.getOrDefault(e.getKey(), new long[3]);
          if (a[0] - b[0] + a[2] - b[2] == 0) {
            continue;
          }
          System.out.printf(
              "| %s | %.2f | %.1f | %.2f |%n",
              e.getKey(),
              (a[0] - b[0]) / elapsedS,
              (a[1] - b[1]) / elapsedS,
              (a[2] - b[2]) / elapsedS);
        }
      }
    }
  }

  /** Counters read at one moment: the service's CPU, the database's transactions, table stats. */
  private record Snapshot(long atNanos, long cpuMs, long transactions, Map<String, long[]> tables) {

    static Snapshot of(TestDatabase db, ServiceProcess service) {
      // The statistics collector publishes its counters with a delay: read them fresh.
      db.column("SELECT pg_stat_clear_snapshot()");
      long transactions =
          Long.parseLong(
              db.column(
                      "SELECT xact_commit + xact_rollback FROM pg_stat_database"
                          + " WHERE datname = current_database()")
                  .get(0));
      Map<String, long[]> tables = new LinkedHashMap<>();
      for (List<String> r :
          db.rows(
              "SELECT CASE schemaname WHEN 'rest' THEN 'the namespaces'' runs tables'"
                  + " ELSE schemaname || '.' || relname END,"
                  + " sum(coalesce(seq_scan, 0) + coalesce(idx_scan, 0)),"
                  + " sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)),"
                  + " sum(n_tup_ins + n_tup_upd + n_tup_del) FROM pg_stat_user_tables"
                  + " WHERE schemaname IN ('rollcall', 'rest') GROUP BY 1 ORDER BY 1")) {
        tables.put(
            r.get(0),
            new long[] {
              Long.parseLong(r.get(1)), Long.parseLong(r.get(2)), Long.parseLong(r.get(3))
            });
      }
      return new Snapshot(System.nanoTime(), service.cpuMillis(), transactions, tables);
    }
  }
}
