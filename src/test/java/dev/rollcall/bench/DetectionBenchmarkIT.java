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
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Dead-owner detection with default settings (heartbeat 3 s, lease TTL 10 s, reaper 1 s) against
 * the packaged service: simulated instances heartbeat with an in-flight run each, then are killed
 * (they stop heartbeating, as after SIGKILL) or leave gracefully, at random moments; a surviving
 * instance polls claims every 250 ms. Prints p50/p99 from kill (or leave) to the takeover batch
 * being claimed, and the service-side detection latency. Run with {@code ./mvnw -B verify -Pbench}.
 */
@Tag("benchmark")
class DetectionBenchmarkIT {

  @Test
  void detectionLatency() throws Exception {
    int kills = Integer.getInteger("bench.kills", 50);
    int leaves = Integer.getInteger("bench.leaves", 10);
    try (TestDatabase db = TestDatabase.start()) {
      Db.bind(db);
      SourceTables.create(db);
      EngineFixture.setUpSchemas(db);
      try (ServiceProcess service =
          ServiceProcess.start("detection", db, SourceTables.namespaceSettings())) {
        run(new Api(service.base()), kills, leaves);
      }
    }
  }

  private void run(Api api, int kills, int leaves) throws Exception {
    String deploy = UUID.randomUUID().toString();
    Instance survivor = api.register(SourceTables.LARGE, deploy, "survivor");
    api.drain(survivor, 5000);
    List<String> runs = Db.activeRuns(SourceTables.LARGE).stream().sorted().toList();
    ScheduledExecutorService timers = Executors.newScheduledThreadPool(4);
    Map<UUID, Long> endedAt = new ConcurrentHashMap<>();
    Map<UUID, Long> claimedAt = new ConcurrentHashMap<>();
    List<UUID> crashed = Collections.synchronizedList(new ArrayList<>());
    List<UUID> departed = Collections.synchronizedList(new ArrayList<>());
    timers.scheduleAtFixedRate(() -> api.heartbeat(survivor), 0, 3, TimeUnit.SECONDS);
    int total = kills + leaves;
    for (int i = 0; i < total; i++) {
      Instance victim = api.register(SourceTables.LARGE, deploy, "victim-" + i);
      // A run of its own: a run two live victims share would be owned by the survivor of the two.
      List<String> inFlight = List.of(runs.get(i));
      ScheduledFuture<?> beats =
          timers.scheduleAtFixedRate(
              () -> api.heartbeat(victim, inFlight),
              ThreadLocalRandom.current().nextLong(3000),
              3000,
              TimeUnit.MILLISECONDS);
      boolean crash = i < kills;
      long endAfter = 4000 + ThreadLocalRandom.current().nextLong(8000);
      timers.schedule(
          () -> {
            beats.cancel(false);
            endedAt.put(victim.id(), System.nanoTime());
            if (crash) {
              crashed.add(victim.id());
            } else {
              api.leave(victim, inFlight).expect(204);
              departed.add(victim.id());
            }
          },
          endAfter,
          TimeUnit.MILLISECONDS);
    }
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
    while (claimedAt.size() < total && System.nanoTime() < deadline) {
      Api.Reply r = api.claim(survivor, 5000).expect(200);
      if (r.text("status").equals("batch")) {
        Batch b = Api.batch(r.body().get("batch"));
        long now = System.nanoTime();
        r.body()
            .get("batch")
            .get("runs")
            .forEach(
                run ->
                    claimedAt.putIfAbsent(
                        UUID.fromString(run.get("deadInstanceId").asText()), now));
        api.complete(survivor, b, List.of()).expect(200);
      } else {
        Thread.sleep(250);
      }
    }
    timers.shutdownNow();
    System.out.printf(
        "%nDead-owner detection (defaults: heartbeat 3 s, lease TTL 10 s, reaper 1 s)%n"
            + "  crash (stop heartbeating) → takeover batch claimed: %s%n"
            + "  graceful leave → takeover batch claimed:            %s%n"
            + "  service side, lease expiry → takeover opened:       %s%n%n",
        percentiles(crashed, endedAt, claimedAt),
        percentiles(departed, endedAt, claimedAt),
        serviceSide());
  }

  private static String percentiles(List<UUID> ids, Map<UUID, Long> from, Map<UUID, Long> to) {
    List<Long> ms = new ArrayList<>();
    int missing = 0;
    for (UUID id : ids) {
      if (to.containsKey(id)) {
        ms.add((to.get(id) - from.get(id)) / 1_000_000);
      } else {
        missing++;
      }
    }
    return Latencies.summary(ms) + (missing > 0 ? ", " + missing + " never taken over" : "");
  }

  private static String serviceSide() {
    List<Long> ms = new ArrayList<>();
    Db.column(
            "SELECT (extract(epoch FROM created_at - subject_lease_expired_at) * 1000)::bigint"
                + " FROM rollcall.epochs WHERE kind = 'takeover' AND subject_lease_expired_at"
                + " IS NOT NULL")
        .forEach(v -> ms.add(Long.parseLong(v)));
    return Latencies.summary(ms);
  }
}
