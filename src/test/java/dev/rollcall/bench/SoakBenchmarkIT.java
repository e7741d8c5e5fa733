package dev.rollcall.bench;

import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Batch;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.EngineFixture;
import dev.rollcall.testing.ServiceProcess;
import dev.rollcall.testing.SourceTables;
import dev.rollcall.testing.TestDatabase;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Weeks of operation compressed into minutes, against the packaged service: {@code bench.runs}
 * active runs (20 000; the full size is 100 000) of which all but a few per day are parked (the
 * engine writes nothing to them), a sweep every 2 s, a deploy every simulated day with {@code
 * bench.replicas} (4) simulated instances that each recover its boot pass, heartbeat and claim; on
 * every deploy one old replica is killed (its lease runs out, a takeover follows) and the others
 * leave; once a week a rollout is aborted mid-recovery (its only instance dies holding its boot
 * pass, which must be closed as stranded). One simulated day is {@code bench.day-seconds} (24 s: a
 * deploy's recovery and quiet window then leave most of the day to sweeps, about 40 a week),
 * retention keeps two days. Prints, per simulated week, table sizes, sweep pass time and claim
 * latency, and the most epochs ever seen open longer than the stranded grace. Run with {@code
 * bench/run soak}.
 */
@Tag("benchmark")
class SoakBenchmarkIT {

  static final String NS = SourceTables.ACTIVE;
  static final List<String> TABLES =
      List.of(
          "ledger", "batch_runs", "batches", "epochs", "epoch_counts", "instances", "ownership");

  final int runs = Integer.getInteger("bench.runs", 20_000);
  final int replicas = Integer.getInteger("bench.replicas", 4);
  final int weeks = Integer.getInteger("bench.weeks", 4);
  final long dayMs = 1000L * Integer.getInteger("bench.day-seconds", 24);
  final long graceMs = 2 * dayMs / 3;

  final ConcurrentLinkedQueue<Long> claimMs = new ConcurrentLinkedQueue<>();
  // Collected as sweeps close: retention deletes a closed sweep two simulated days later.
  final ConcurrentLinkedQueue<Long> sweepMs = new ConcurrentLinkedQueue<>();
  long lastSweepSeen = 0;
  final AtomicLong errors = new AtomicLong();
  final AtomicLong maxStrandedSeen = new AtomicLong();
  // The service's most resident memory in the current simulated week (sampled every second).
  final AtomicLong weekRssMiB = new AtomicLong();

  @Test
  void weeksOfOperationKeepTablesAndSweepsFlat() throws Exception {
    try (TestDatabase db = TestDatabase.start()) {
      Db.bind(db);
      SourceTables.create(db);
      EngineFixture.setUpSchemas(db);
      SourceTables.insertRuns(db, NS, 1, runs, 0);
      Map<String, String> settings = new HashMap<>(SourceTables.namespaceSettings());
      // Short leases: a deploy's quiet window (two lease TTLs, no sweep while instances register)
      // is a third of a simulated day, so sweeps run several times a day between deploys.
      settings.put("rollcall.heartbeat-interval", "500ms");
      settings.put("rollcall.lease-ttl", "2s");
      settings.put("rollcall.sweep.interval", "2s");
      settings.put("rollcall.sweep.max-runs-per-second", "1000000");
      settings.put("rollcall.batch.lease", "10s");
      settings.put("rollcall.stranded-epoch-grace", graceMs + "ms");
      settings.put("rollcall.retention.interval", "2s");
      settings.put("rollcall.retention.age", (2 * dayMs) + "ms");
      settings.put("rollcall.rate-limit.claims-per-second", "0");
      settings.put("rollcall.rate-limit.heartbeats-per-second", "0");
      try (ServiceProcess service = ServiceProcess.start("soak", db, settings)) {
        run(service, new Api(service.base()));
      }
    }
  }

  /** One live replica: heartbeats and claims until stopped (or killed: it just goes silent). */
  final class Replica implements Runnable {
    final Instance instance;
    final AtomicBoolean stop = new AtomicBoolean();
    final Api api;

    Replica(Api api, Instance instance) {
      this.api = api;
      this.instance = instance;
    }

    @Override
    public void run() {
      long nextBeat = 0;
      while (!stop.get()) {
        try {
          if (System.currentTimeMillis() >= nextBeat) {
            api.heartbeat(instance).expect(200);
            nextBeat = System.currentTimeMillis() + 500;
          }
          long t0 = System.nanoTime();
          Api.Reply r = api.claim(instance, 2000);
          claimMs.add((System.nanoTime() - t0) / 1_000_000);
          if (r.status() != 200) {
            errors.incrementAndGet();
            sleep(200);
            continue;
          }
          if ("batch".equals(r.text("status"))) {
            Batch b = Api.batch(r.body().get("batch"));
            api.complete(instance, b, List.of()).expect(200);
          } else {
            sleep("wait".equals(r.text("status")) ? r.body().get("retryAfterMs").asLong() : 300);
          }
        } catch (RuntimeException | AssertionError e) {
          errors.incrementAndGet();
          sleep(200);
        }
      }
    }
  }

  void run(ServiceProcess service, Api api) throws Exception {
    ExecutorService pool = Executors.newCachedThreadPool();
    List<Replica> live = new CopyOnWriteArrayList<>();
    AtomicBoolean sampling = new AtomicBoolean(true);
    pool.submit(
        () -> {
          for (long tick = 1; sampling.get(); tick++) {
            try {
              weekRssMiB.accumulateAndGet(service.residentMiB(), Math::max);
              maxStrandedSeen.accumulateAndGet(strandedTooLong(), Math::max);
              collectSweeps();
              // The metrics are scraped every 15 s, as a Prometheus server would, so that what a
              // scrape leaves behind counts in the service's memory.
              if (tick % 15 == 0) {
                service.scrape();
              }
            } catch (RuntimeException e) {
              errors.incrementAndGet();
            }
            sleep(1000);
          }
        });
    List<String> rows = new ArrayList<>();
    long start = System.currentTimeMillis();
    int deploy = 0;
    for (int week = 1; week <= weeks; week++) {
      long weekStart = System.currentTimeMillis();
      claimMs.clear();
      sweepMs.clear();
      weekRssMiB.set(service.residentMiB());
      for (int day = 1; day <= 7; day++) {
        long dayStart = System.currentTimeMillis();
        deploy++;
        // A new rollout: its replicas register and serve; the old ones go (one of them killed).
        List<Replica> old = new ArrayList<>(live);
        live.clear();
        for (int r = 0; r < replicas; r++) {
          Replica replica =
              new Replica(api, api.register(NS, "deploy-" + deploy, "r" + r + "-" + deploy));
          live.add(replica);
          pool.submit(replica);
        }
        for (int i = 0; i < old.size(); i++) {
          Replica gone = old.get(i);
          gone.stop.set(true);
          if (i > 0) {
            api.leave(gone.instance);
          }
        }
        // The engine touches a few parked runs a day: the next sweep re-drives exactly those.
        Db.update(
            "UPDATE "
                + SourceTables.table(NS)
                + " SET updated_at = now() WHERE id IN (SELECT id FROM "
                + SourceTables.table(NS)
                + " ORDER BY random() LIMIT 20)");
        if (day == 4) {
          abortedRollout(api, deploy);
        }
        sleep(dayMs - (System.currentTimeMillis() - dayStart));
      }
      rows.add(weekRow(week, weekStart) + " " + weekRssMiB.get() + " |");
      System.out.println("[soak] " + rows.get(rows.size() - 1));
    }
    sampling.set(false);
    live.forEach(r -> r.stop.set(true));
    pool.shutdown();
    pool.awaitTermination(30, TimeUnit.SECONDS);
    System.out.println();
    System.out.println(
        "Soak: "
            + runs
            + " active runs (parked but 20 a day), "
            + replicas
            + " replicas per deploy, a deploy per simulated day of "
            + dayMs / 1000
            + " s, retention age 2 days, stranded grace "
            + graceMs
            + " ms, sweeps every 2 s; "
            + (System.currentTimeMillis() - start) / 1000
            + " s wall");
    System.out.println(
        "| week | "
            + String.join(" | ", TABLES)
            + " | rollcall schema MB | sweeps | sweep pass p50 / max ms | claim p50 / p99 ms"
            + " | service RSS MiB, most in the week |");
    System.out.println("|" + "---|".repeat(TABLES.size() + 6));
    rows.forEach(System.out::println);
    System.out.println(
        "epochs seen open longer than the grace (no live instance): max "
            + maxStrandedSeen.get()
            + "; request errors: "
            + errors.get()
            + "; service RSS at its peak since it started (VmHWM) "
            + service.peakResidentMiB()
            + " MiB");
  }

  /** One rollout's only instance takes a batch of its boot pass and dies. */
  void abortedRollout(Api api, int deploy) {
    Instance doomed = api.register(NS, "aborted-" + deploy, "doomed");
    api.claim(doomed, 100);
  }

  /**
   * Open boot epochs whose deployment has had no live instance for longer than the grace plus the
   * checker's own period (the reaper interval, 1 s) and a second of slack.
   */
  long strandedTooLong() {
    return Db.number(
        "SELECT count(*) FROM rollcall.epochs e WHERE e.kind = 'boot' AND e.state = 'open'"
            + " AND NOT EXISTS (SELECT 1 FROM rollcall.instances i WHERE i.namespace = e.namespace"
            + "   AND i.deployment_id = e.deployment_id AND i.state = 'live'"
            + "   AND i.lease_expires_at > now())"
            + " AND coalesce((SELECT max(least(i.ended_at, i.lease_expires_at))"
            + "   FROM rollcall.instances i WHERE i.namespace = e.namespace"
            + "   AND i.deployment_id = e.deployment_id), e.created_at)"
            + "   < now() - (?::bigint + 2000) * interval '1 millisecond'",
        graceMs);
  }

  /** Records the pass time of every sweep closed since the last look. */
  void collectSweeps() {
    for (List<String> row :
        Db.database()
            .rows(
                "SELECT id, (extract(epoch FROM closed_at - created_at) * 1000)::bigint FROM"
                    + " rollcall.epochs WHERE kind = 'sweep' AND state = 'closed'"
                    + " AND close_reason = 'completed' AND id > ? ORDER BY id",
                lastSweepSeen)) {
      lastSweepSeen = Long.parseLong(row.get(0));
      sweepMs.add(Long.parseLong(row.get(1)));
    }
  }

  String weekRow(int week, long weekStart) {
    StringBuilder row = new StringBuilder("| " + week + " | ");
    for (String table : TABLES) {
      row.append(Db.number("SELECT count(*) FROM rollcall." + table)).append(" | ");
    }
    row.append(
            Db.number(
                "SELECT (sum(pg_total_relation_size(c.oid)) / 1048576)::bigint FROM pg_class c"
                    + " JOIN pg_namespace n ON n.oid = c.relnamespace"
                    + " WHERE n.nspname = 'rollcall' AND c.relkind = 'r'"))
        .append(" | ");
    List<Long> sweeps = new ArrayList<>(sweepMs);
    sweeps.sort(null);
    List<Long> claims = new ArrayList<>(claimMs);
    claims.sort(null);
    row.append(sweeps.size())
        .append(" | ")
        .append(sweeps.isEmpty() ? 0 : Latencies.percentile(sweeps, 0.5))
        .append(" / ")
        .append(sweeps.isEmpty() ? 0 : sweeps.get(sweeps.size() - 1))
        .append(" | ")
        .append(claims.isEmpty() ? 0 : Latencies.percentile(claims, 0.5))
        .append(" / ")
        .append(claims.isEmpty() ? 0 : Latencies.percentile(claims, 0.99))
        .append(" |");
    return row.toString();
  }

  static void sleep(long ms) {
    if (ms <= 0) {
      return;
    }
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
