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
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Service load with default settings against the packaged service: {@code bench.instances}
 * simulated instances (1 000) heartbeating every 3 s, plus {@code bench.claimers} (64) claimers
 * running boot passes back to back, for {@code bench.seconds} (30). Prints throughput, p50/p99
 * latency, errors and the service's resident memory. All traffic on loopback; bounded in time. Run
 * with {@code ./mvnw -B verify -Pbench -Dtest=none -Dsurefire.failIfNoSpecifiedTests=false
 * -Dit.test=LoadBenchmarkIT}.
 */
@Tag("benchmark")
class LoadBenchmarkIT {

  @Test
  void heartbeatsAndClaimsUnderLoad() throws Exception {
    int instances = Integer.getInteger("bench.instances", 1000);
    int claimers = Integer.getInteger("bench.claimers", 64);
    int seconds = Integer.getInteger("bench.seconds", 30);
    try (TestDatabase db = TestDatabase.start()) {
      Db.bind(db);
      SourceTables.create(db);
      EngineFixture.setUpSchemas(db);
      try (ServiceProcess service =
          ServiceProcess.start("load", db, SourceTables.namespaceSettings())) {
        run(service, instances, claimers, seconds);
      }
    }
  }

  /**
   * Enough blocking senders that the generator keeps up with 1 000 instances every 3 s (333/s at a
   * p99 near one second): with 32 it fell behind, so instances beat late and some lost their lease,
   * which measured the generator rather than the service.
   */
  private static final int HEARTBEAT_THREADS = 128;

  private void run(ServiceProcess service, int instanceCount, int claimerCount, int seconds)
      throws Exception {
    Api api = new Api(service.base());
    ConcurrentLinkedQueue<Long> heartbeatMs = new ConcurrentLinkedQueue<>();
    ConcurrentLinkedQueue<Long> claimMs = new ConcurrentLinkedQueue<>();
    Map<String, AtomicLong> errorsByKind = new ConcurrentHashMap<>();
    AtomicLong runsHandedOut = new AtomicLong();
    // Until registration is done the deadline is far away; then the measured window starts.
    long[] deadline = {Long.MAX_VALUE};
    ScheduledExecutorService beats = Executors.newScheduledThreadPool(HEARTBEAT_THREADS);
    // Each instance heartbeats from the moment it registers, as a real one does.
    long registering = System.nanoTime();
    for (int n = 0; n < instanceCount; n++) {
      Instance instance = api.register(SourceTables.SMALL, "fleet", "fleet-" + n);
      beats.scheduleAtFixedRate(
          () -> {
            if (System.nanoTime() > deadline[0]) {
              return;
            }
            long t0 = System.nanoTime();
            try {
              int status = api.heartbeat(instance).status();
              if (status != 200) {
                error(errorsByKind, "heartbeat " + status);
              }
            } catch (RuntimeException e) {
              error(errorsByKind, "heartbeat " + e.getClass().getSimpleName());
            }
            heartbeatMs.add((System.nanoTime() - t0) / 1_000_000);
          },
          ThreadLocalRandom.current().nextLong(3000),
          3000,
          TimeUnit.MILLISECONDS);
    }
    long registerMs = (System.nanoTime() - registering) / 1_000_000;
    heartbeatMs.clear();
    deadline[0] = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
    ExecutorService claiming = Executors.newFixedThreadPool(claimerCount);
    for (int c = 0; c < claimerCount; c++) {
      int me = c;
      claiming.submit(
          () -> {
            while (System.nanoTime() < deadline[0]) {
              // Each claimer plays a replica of a new deploy of the large namespace, again and
              // again: a boot pass shared by the claimers that joined the same deploy.
              String deploy = "load-" + (me % 8) + "-" + System.nanoTime() / 5_000_000_000L;
              Instance i = api.register(SourceTables.LARGE, deploy, "claimer-" + me);
              while (System.nanoTime() < deadline[0]) {
                long t0 = System.nanoTime();
                Api.Reply r;
                try {
                  r = api.claim(i, 500);
                } catch (RuntimeException e) {
                  error(errorsByKind, "claim " + e.getClass().getSimpleName());
                  continue;
                }
                claimMs.add((System.nanoTime() - t0) / 1_000_000);
                if (r.status() != 200) {
                  error(errorsByKind, "claim " + r.status());
                  break;
                }
                String status = r.text("status");
                if (status.equals("done")) {
                  break;
                }
                if (status.equals("wait")) {
                  sleep(r.body().get("retryAfterMs").asLong());
                  continue;
                }
                Batch b = Api.batch(r.body().get("batch"));
                runsHandedOut.addAndGet(b.runIds().size());
                int done = api.complete(i, b, List.of()).status();
                if (done != 200) {
                  error(errorsByKind, "complete " + done);
                }
              }
              api.leave(i);
            }
            return null;
          });
    }
    claiming.shutdown();
    claiming.awaitTermination(seconds + 60, TimeUnit.SECONDS);
    long rss = service.residentMiB();
    beats.shutdownNow();
    System.out.printf(
        "%nService load (%d instances heartbeating every 3 s, %d claimers, %d s, defaults)%n"
            + "  heartbeats  %6d (%.0f/s)  p50 %d ms  p99 %d ms%n"
            + "  claims      %6d (%.0f/s)  p50 %d ms  p99 %d ms  (%d runs handed out)%n"
            + "  registering %d instances took %d ms%n"
            + "  errors      %s%n"
            + "  service RSS %d MiB%n%n",
        instanceCount,
        claimerCount,
        seconds,
        heartbeatMs.size(),
        heartbeatMs.size() / (double) seconds,
        percentile(heartbeatMs, 0.50),
        percentile(heartbeatMs, 0.99),
        claimMs.size(),
        claimMs.size() / (double) seconds,
        percentile(claimMs, 0.50),
        percentile(claimMs, 0.99),
        runsHandedOut.get(),
        instanceCount,
        registerMs,
        errorsByKind.isEmpty() ? "none" : errorsByKind.toString(),
        rss);
  }

  private static void error(Map<String, AtomicLong> errors, String kind) {
    errors.computeIfAbsent(kind, k -> new AtomicLong()).incrementAndGet();
  }

  private static long percentile(ConcurrentLinkedQueue<Long> samples, double p) {
    List<Long> sorted = new ArrayList<>(samples);
    if (sorted.isEmpty()) {
      return -1;
    }
    Collections.sort(sorted);
    return sorted.get((int) Math.ceil(p * (sorted.size() - 1)));
  }

  private static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
