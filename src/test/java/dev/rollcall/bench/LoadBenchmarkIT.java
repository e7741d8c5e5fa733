package dev.rollcall.bench;

import dev.rollcall.registry.SessionLiveness;
import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Batch;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.Cpu;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.EngineFixture;
import dev.rollcall.testing.ServiceProcess;
import dev.rollcall.testing.SourceTables;
import dev.rollcall.testing.TestDatabase;
import io.vertx.core.Vertx;
import io.vertx.core.VertxOptions;
import io.vertx.core.http.HttpClient;
import io.vertx.core.http.HttpClientOptions;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.RequestOptions;
import java.nio.file.Path;
import java.sql.Connection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Service load with default settings against the packaged service: {@code bench.instances}
 * simulated instances (1 000) heartbeating every 3 s, plus {@code bench.claimers} (64) claimers
 * running boot passes, each claiming {@code bench.claim-runs} (500) runs every {@code
 * bench.claim-ms} (1 000; 0: back to back), for {@code bench.seconds} (30); with {@code
 * bench.idle-look-ms} set, each instance also sends an idle claim every that many ms, as a client
 * whose pass is over looks from its held idle claim. Prints throughput, p50/p99 latency, errors and
 * the service's resident memory. All traffic on loopback; bounded in time. Run with {@code ./mvnw
 * -B verify -Pbench -Dtest=none -Dsurefire.failIfNoSpecifiedTests=false -Dit.test=LoadBenchmarkIT}.
 * With {@code bench.tracing-pairs} (N), N pairs of runs with tracing off and on instead; with
 * {@code bench.baseline-pairs} (N) and {@code bench.baseline-app} (another build's {@code
 * quarkus-app} directory), N pairs of that build and this one ({@link LoadPairs}). With {@code
 * -Dbench.results=FILE}, a run that is not one of such pairs appends its figures to FILE as a CSV
 * row ({@link LoadRow}).
 */
@Tag("benchmark")
class LoadBenchmarkIT {

  @Test
  void heartbeatsAndClaimsUnderLoad() throws Exception {
    int instances = Integer.getInteger("bench.instances", 1000);
    int claimers = Integer.getInteger("bench.claimers", 64);
    int seconds = Integer.getInteger("bench.seconds", 30);
    int tracingPairs = Integer.getInteger("bench.tracing-pairs", 0);
    int baselinePairs = Integer.getInteger("bench.baseline-pairs", 0);
    Path thisBuild = Path.of(System.getProperty("rollcall.app.dir", "target/quarkus-app"));
    LoadPairs.Load load =
        (app, settings) -> once(app, settings, instances, claimers, seconds, Optional.empty());
    if (tracingPairs > 0) {
      LoadPairs.measure("tracing", tracingPairs, LoadPairs.tracing(thisBuild), load);
      return;
    }
    if (baselinePairs > 0) {
      String baseline = System.getProperty("bench.baseline-app", "");
      if (baseline.isBlank()) {
        throw new IllegalArgumentException(
            "bench.baseline-pairs needs bench.baseline-app: another build's quarkus-app directory");
      }
      LoadPairs.measure(
          "build", baselinePairs, LoadPairs.builds(Path.of(baseline), thisBuild), load);
      return;
    }
    once(thisBuild, Map.of(), instances, claimers, seconds, ResultsFile.named());
  }

  /**
   * One run on a database and a service of its own (the one packaged in {@code app}), the service
   * also given {@code settings}; its row appended to {@code results}, if any ({@link LoadRow}).
   */
  private LoadFigures once(
      Path app,
      Map<String, String> settings,
      int instances,
      int claimers,
      int seconds,
      Optional<ResultsFile> results)
      throws Exception {
    try (TestDatabase db = TestDatabase.start()) {
      Db.bind(db);
      SourceTables.create(db);
      EngineFixture.setUpSchemas(db);
      Map<String, String> all = new java.util.HashMap<>(SourceTables.namespaceSettings());
      all.putAll(settings);
      try (ServiceProcess service =
          ServiceProcess.start("load", db, all, Duration.ofSeconds(90), app)) {
        return run(service, instances, claimers, seconds, results);
      }
    }
  }

  private LoadFigures run(
      ServiceProcess service,
      int instanceCount,
      int claimerCount,
      int seconds,
      Optional<ResultsFile> results)
      throws Exception {
    long periodMs = Long.getLong("bench.heartbeat-ms", 3000);
    Api api = new Api(service.base());
    ConcurrentLinkedQueue<Long> heartbeatMs = new ConcurrentLinkedQueue<>();
    ConcurrentLinkedQueue<Long> claimMs = new ConcurrentLinkedQueue<>();
    // Claims that handed out a batch (the others answered wait or done).
    ConcurrentLinkedQueue<Long> batchClaimMs = new ConcurrentLinkedQueue<>();
    // How late each counted claim left the claimer (its thread was busy with the claimer's own
    // heartbeat, leave or registration), and its latency from then: the service's share.
    ConcurrentLinkedQueue<Long> claimSentLateMs = new ConcurrentLinkedQueue<>();
    ConcurrentLinkedQueue<Long> claimFromSentMs = new ConcurrentLinkedQueue<>();
    Map<String, AtomicLong> errorsByKind = new ConcurrentHashMap<>();
    AtomicLong runsHandedOut = new AtomicLong();
    AtomicLong leasesLost = new AtomicLong();
    AtomicLong peakRss = new AtomicLong();
    Map<Integer, Integer> slowBySecond = new ConcurrentHashMap<>();
    // Where a heartbeat's time went: waiting for one of this driver's connections (from when it
    // was due until it had one), then sent and answered; in the warm-up (registration included)
    // and in the window apart.
    Split warmUpBeats = new Split();
    Split windowBeats = new Split();
    // Heartbeat and claim latencies by the 10 s part of the window they were due in: a service
    // still compiling its code when the window opens shows as a slower first part.
    Map<Integer, ConcurrentLinkedQueue<Long>> beatsByPart = new ConcurrentHashMap<>();
    Map<Integer, ConcurrentLinkedQueue<Long>> claimsByPart = new ConcurrentHashMap<>();
    // Counted claims over 100 ms, by what they were: the first claim of a claimer's instance
    // (it joins, or opens, its deploy's boot epoch) or a later one, and by the answer; and by the
    // second of the 5 s deploy slot they were due in (every 5 s each claimer joins a new deploy).
    Map<String, Integer> slowClaims = new ConcurrentHashMap<>();
    // Counted claims apart by that first-or-later split, all of them.
    ConcurrentLinkedQueue<Long> firstClaimMs = new ConcurrentLinkedQueue<>();
    ConcurrentLinkedQueue<Long> laterClaimMs = new ConcurrentLinkedQueue<>();
    Map<Integer, Integer> slowClaimsBySlotSecond = new ConcurrentHashMap<>();
    // Until registration is done the measured window has not started: beats are sent, not counted.
    AtomicLongArray window = new AtomicLongArray(new long[] {Long.MAX_VALUE, Long.MAX_VALUE});
    // Heartbeats are sent asynchronously at the moment they are due, whatever earlier ones are
    // doing (open loop), and their latency counts from that moment: a slow service cannot slow
    // the load down and hide its own queueing.
    // A light client that keeps its connections (at most bench.connections): beats beyond them
    // wait in the client, still counted from when they were due. One connection per outstanding
    // beat ran this driver out of file descriptors once the service fell seconds behind.
    Vertx vertx = Vertx.vertx(new VertxOptions().setEventLoopPoolSize(2));
    HttpClient http =
        vertx.createHttpClient(
            new HttpClientOptions()
                .setDefaultHost(service.base().getHost())
                .setDefaultPort(service.base().getPort())
                .setKeepAlive(true)
                // No idle timeout: clients keep their connection for as long as they run, and
                // Vert.x's default (60 s) closed and reopened two thirds of 3 000 connections at
                // once a minute after the registration ramp, slowing the window for seconds.
                .setKeepAliveTimeout(0)
                .setMaxPoolSize(Integer.getInteger("bench.connections", 256))
                .setMaxWaitQueueSize(-1));
    ScheduledExecutorService beats = Executors.newScheduledThreadPool(4);
    // -Dbench.scrape-seconds=S: the service's /q/metrics is read every S seconds from before the
    // fleet registers to the end, as a Prometheus server would (0: only the two reads that give
    // the window's counters). A scrape runs on one of the service's worker threads.
    long scrapeSeconds = Long.getLong("bench.scrape-seconds", 0);
    ConcurrentLinkedQueue<Long> scrapeMs = new ConcurrentLinkedQueue<>();
    AtomicLong scrapeErrors = new AtomicLong();
    ScheduledExecutorService scraper = Executors.newSingleThreadScheduledExecutor();
    if (scrapeSeconds > 0) {
      scraper.scheduleAtFixedRate(
          () -> {
            long started = System.nanoTime();
            try {
              service.scrape();
              scrapeMs.add((System.nanoTime() - started) / 1_000_000);
            } catch (RuntimeException e) {
              scrapeErrors.incrementAndGet();
            }
          },
          scrapeSeconds,
          scrapeSeconds,
          TimeUnit.SECONDS);
    }
    // Each instance has at most one heartbeat outstanding, as a client has (its session sends a
    // beat due meanwhile as soon as the outstanding one is answered, and several as one): a slow
    // second of the service then queues at most one beat per instance in this driver, not one
    // per interval that passed. -Dbench.one-beat-at-a-time=false sends every beat when due
    // whatever the instance's last one is doing, as this driver did before.
    boolean oneAtATime =
        Boolean.parseBoolean(System.getProperty("bench.one-beat-at-a-time", "true"));
    // Beats that fell due while their instance's last one was outstanding and went with the next
    // send instead (counted once, from the first one's due time): in the window and before it.
    AtomicLong mergedInWindow = new AtomicLong();
    AtomicLong mergedBefore = new AtomicLong();
    // -Dbench.idle-look-ms=P: each fleet instance also sends an idle claim answered at once
    // (waitMs 0) every P ms, open loop: the look a client's held idle claim makes when it starts
    // and when its hold ends (every 20 s per instance, so P = 10 000 is a fleet of clients). The
    // fleet's pass is worked to its end first, as it is when a deploy's clients go idle.
    long idleLookMs = Long.getLong("bench.idle-look-ms", 0);
    // -Dbench.fleet=engine: the fleet registers in the world-postgres namespace (a queue beside
    // its runs, as the engine's clients have) instead of a table source's; with -Dbench.in-flight
    // the first set of each instance has queue jobs keyed by its message ids, locked by the
    // instance's worker once the fleet is registered, as a worker holds the jobs it executes.
    String fleet = System.getProperty("bench.fleet", "table");
    String fleetNamespace =
        switch (fleet) {
          case "table" -> SourceTables.SMALL;
          case "engine" -> SourceTables.ENGINE;
          default -> throw new IllegalArgumentException("bench.fleet is table or engine: " + fleet);
        };
    ConcurrentLinkedQueue<Long> idleLookLatencies = new ConcurrentLinkedQueue<>();
    Map<String, Integer> idleAnswers = new ConcurrentHashMap<>();
    if (idleLookMs > 0) {
      Instance drainer = api.register(fleetNamespace, "fleet", "fleet-pass");
      api.drain(drainer, 5000);
      api.leave(drainer).expect(204);
    }
    // -Dbench.session-locks=true: every fleet instance's session lock is held, as its client holds
    // it, and each heartbeat reports it held by that backend, as a client's does. The locks are
    // spread over a few sessions (a lock table as large as the fleet's, with fewer backends than
    // a fleet would have).
    List<Connection> holders = new ArrayList<>();
    List<Integer> holderPids = new ArrayList<>();
    if (Boolean.getBoolean("bench.session-locks")) {
      for (int h = 0; h < 16; h++) {
        Connection c = Db.database().connect();
        holders.add(c);
        holderPids.add(Integer.valueOf(one(c, "SELECT pg_backend_pid()::text")));
      }
    }
    // -Dbench.in-flight=K: each heartbeat also carries the instance's in-flight set, as every
    // client's does: K executions (run id and queue message id; 0: an empty set, an idle
    // client's), of which -Dbench.in-flight-changes=C are replaced by new ones at every beat (runs
    // finishing while others start; 0: the same set beat after beat, as during long steps).
    int inFlightSize = Integer.getInteger("bench.in-flight", -1);
    int inFlightChanges = Integer.getInteger("bench.in-flight-changes", 0);
    // -Dbench.in-flight-change-every=E: the set moves on at every E-th beat only (1: every beat).
    int changeEvery = Math.max(1, Integer.getInteger("bench.in-flight-change-every", 1));
    boolean jobs = fleet.equals("engine") && inFlightSize > 0;
    // The queue's workers: each instance's jobs are locked by its worker once it has registered
    // and before its first heartbeat, as a worker locks a job before its client reports executing
    // the job's message. (Locked before registration, they are orphans the service rightly
    // releases; locked once the whole fleet is registered, every beat until then reports messages
    // whose jobs no worker holds, looked up again at each beat, which a client never sends.)
    List<Connection> workers = new ArrayList<>();
    if (jobs) {
      addJobs(instanceCount, inFlightSize);
      for (int w = 0; w < 16; w++) {
        workers.add(Db.database().connect());
      }
    }
    ExecutorService registrars = Executors.newFixedThreadPool(16);
    long registering = System.nanoTime();
    List<java.util.concurrent.Future<?>> registered = new ArrayList<>();
    for (int n = 0; n < instanceCount; n++) {
      int me = n;
      registered.add(
          registrars.submit(
              () -> {
                Instance instance = api.register(fleetNamespace, "fleet", "fleet-" + me);
                RequestOptions beat = SimulatedFleet.heartbeat(instance);
                String report = "";
                if (!holders.isEmpty()) {
                  Connection holder = holders.get(me % holders.size());
                  synchronized (holder) {
                    one(
                        holder,
                        "SELECT pg_advisory_lock("
                            + SessionLiveness.CLASS_ID
                            + ", rollcall.session_lock_objid(?::uuid))::text",
                        instance.id().toString());
                  }
                  report =
                      "\"sessionLock\":{\"state\":\"held\",\"pid\":"
                          + holderPids.get(me % holders.size())
                          + ",\"reconnected\":false}";
                }
                if (jobs) {
                  Connection worker = workers.get(me % workers.size());
                  synchronized (worker) {
                    lockJobs(worker, me, inFlightSize);
                  }
                }
                String sessionReport = report;
                AtomicLong beatsSent = new AtomicLong();
                java.util.function.Supplier<io.vertx.core.buffer.Buffer> body =
                    () ->
                        io.vertx.core.buffer.Buffer.buffer(
                            heartbeatBody(
                                me,
                                sessionReport,
                                inFlightSize,
                                inFlightChanges * (beatsSent.getAndIncrement() / changeEvery)));
                OneBeatAtATime gate = new OneBeatAtATime(oneAtATime);
                java.util.concurrent.atomic.AtomicReference<
                        java.util.function.BiConsumer<Long, Boolean>>
                    send = new java.util.concurrent.atomic.AtomicReference<>();
                send.set(
                    (due, counted) -> {
                      long[] sent = {0};
                      http.request(beat)
                          .compose(
                              request -> {
                                sent[0] = System.nanoTime();
                                return request
                                    .send(body.get())
                                    .compose(r -> r.body().map(b -> r.statusCode()));
                              })
                          .onComplete(
                              reply -> {
                                if (sent[0] != 0) {
                                  long answered = System.nanoTime();
                                  (counted ? windowBeats : warmUpBeats)
                                      .add(sent[0] - due, answered - sent[0]);
                                }
                                if (!counted) {
                                  return;
                                }
                                long ms = (System.nanoTime() - due) / 1_000_000;
                                heartbeatMs.add(ms);
                                byPart(beatsByPart, window, due).add(ms);
                                if (ms > 250) {
                                  // When in the window the slow ones were due, by second.
                                  slowBySecond.merge(
                                      (int) ((due - window.get(0)) / 1_000_000_000L),
                                      1,
                                      Integer::sum);
                                }
                                if (reply.failed()) {
                                  error(
                                      errorsByKind,
                                      "heartbeat " + reply.cause().getClass().getSimpleName());
                                } else if (reply.result() == 410) {
                                  leasesLost.incrementAndGet();
                                  error(errorsByKind, "heartbeat 410");
                                } else if (reply.result() != 200) {
                                  error(errorsByKind, "heartbeat " + reply.result());
                                }
                              })
                          .onComplete(
                              reply -> {
                                long next = gate.answered();
                                if (next != OneBeatAtATime.NONE) {
                                  send.get().accept(next, next >= window.get(0));
                                }
                              });
                    });
                SimulatedFleet.openLoop(
                    beats,
                    periodMs,
                    window,
                    (due, counted) -> {
                      OneBeatAtATime.Due go = gate.due(due);
                      if (go == OneBeatAtATime.Due.SEND) {
                        send.get().accept(due, counted);
                      } else if (go == OneBeatAtATime.Due.MERGED) {
                        (counted ? mergedInWindow : mergedBefore).incrementAndGet();
                      }
                    });
                if (idleLookMs > 0) {
                  lookEvery(
                      instance,
                      idleLookMs,
                      http,
                      beats,
                      window,
                      idleLookLatencies,
                      idleAnswers,
                      errorsByKind);
                }
                return null;
              }));
    }
    for (var f : registered) {
      f.get();
    }
    registrars.shutdown();
    long registerMs = (System.nanoTime() - registering) / 1_000_000;
    String fleetRegistered = Db.column("SELECT now()::text").get(0);
    for (Connection worker : workers) {
      worker.close();
    }
    // Each claimer sends a claim every bench.claim-ms (open loop, like the heartbeats): claim k is
    // due at a fixed time and its latency counts from then, so a claim sent late because the one
    // before it was slow is charged for the wait. 0 sends each claim as soon as the last one is
    // answered and completed (back to back: the service's claim throughput, where a claim's
    // latency is the number of claimers divided by the claims served a second). The claimers
    // start with the warm-up, like the heartbeats: their first registrations, the boot epochs they
    // open and the service's first claims (its code not yet compiled) come before the window, and
    // only claims due inside the window are counted.
    long claimersStart = System.nanoTime();
    long claimPeriodNanos = TimeUnit.MILLISECONDS.toNanos(Long.getLong("bench.claim-ms", 1000));
    // Runs per claim: 500 unless -Dbench.claim-runs says (the service's default is larger).
    int claimRuns = Integer.getInteger("bench.claim-runs", 500);
    AtomicLong batchesHandedOut = new AtomicLong();
    ExecutorService claiming = Executors.newFixedThreadPool(Math.max(1, claimerCount));
    for (int c = 0; c < claimerCount; c++) {
      int me = c;
      claiming.submit(
          () -> {
            long next =
                claimersStart
                    + (claimPeriodNanos == 0
                        ? 0
                        : ThreadLocalRandom.current().nextLong(claimPeriodNanos));
            while (next < window.get(1)) {
              // Each claimer plays a replica of a new deploy of the large namespace, again and
              // again: a boot pass shared by the claimers that joined the same deploy.
              String deploy = "load-" + (me % 8) + "-" + System.nanoTime() / 5_000_000_000L;
              Instance i = api.register(SourceTables.LARGE, deploy, "claimer-" + me);
              long beaten = System.nanoTime();
              boolean first = true;
              while (next < window.get(1)) {
                // Back to back, a claim is due once the last one was answered (and any wait it
                // was told to make is over).
                long due = claimPeriodNanos == 0 ? Math.max(System.nanoTime(), next) : next;
                // A claimer heartbeats at the fleet's interval, as a client does, or its lease
                // runs out between claims (these beats are not in the heartbeat figures).
                if (System.nanoTime() - beaten >= periodMs * 1_000_000) {
                  beaten = System.nanoTime();
                  int beat = api.heartbeat(i).status();
                  if (beat != 200) {
                    error(errorsByKind, "claimer heartbeat " + beat);
                    break;
                  }
                }
                sleep((due - System.nanoTime()) / 1_000_000);
                Api.Reply r;
                long sent = System.nanoTime();
                try {
                  r = api.claim(i, claimRuns);
                } catch (RuntimeException e) {
                  error(errorsByKind, "claim " + e.getClass().getSimpleName());
                  next = Math.max(due + claimPeriodNanos, System.nanoTime());
                  continue;
                }
                long answered = System.nanoTime();
                boolean counted = due >= window.get(0) && due < window.get(1);
                if (counted) {
                  claimMs.add((answered - due) / 1_000_000);
                  byPart(claimsByPart, window, due).add((answered - due) / 1_000_000);
                  claimSentLateMs.add(Math.max(0, sent - due) / 1_000_000);
                  claimFromSentMs.add((answered - sent) / 1_000_000);
                }
                next = due + claimPeriodNanos;
                if (counted) {
                  (first ? firstClaimMs : laterClaimMs).add((answered - due) / 1_000_000);
                }
                if (counted && answered - due > 100_000_000L) {
                  String what =
                      (first ? "first " : "later ")
                          + (r.status() == 200 ? r.text("status") : String.valueOf(r.status()));
                  slowClaims.merge(what, 1, Integer::sum);
                  slowClaimsBySlotSecond.merge(
                      (int) ((due % 5_000_000_000L) / 1_000_000_000L), 1, Integer::sum);
                }
                first = false;
                if (r.status() != 200) {
                  error(errorsByKind, "claim " + r.status());
                  break;
                }
                String status = r.text("status");
                if (status.equals("done")) {
                  break;
                }
                if (status.equals("wait")) {
                  // The service says when to come back: the next claim is due then at the
                  // earliest.
                  next =
                      Math.max(
                          next,
                          answered
                              + TimeUnit.MILLISECONDS.toNanos(
                                  r.body().get("retryAfterMs").asLong()));
                  continue;
                }
                Batch b = Api.batch(r.body().get("batch"));
                if (counted) {
                  batchClaimMs.add((answered - due) / 1_000_000);
                  batchesHandedOut.incrementAndGet();
                  runsHandedOut.addAndGet(b.runIds().size());
                }
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
    // The beats sent while instances registered queue behind the registrations: the window opens
    // once that backlog has had time to drain, so it measures the steady state.
    int warmUp = Integer.getInteger("bench.warmup-seconds", 10);
    Thread.sleep(TimeUnit.SECONDS.toMillis(warmUp));
    window.set(0, System.nanoTime());
    Map<String, Double> metricsAtStart = serviceMetrics(service);
    long[] cpuAtStart = {service.cpuMillis(), Cpu.postgres(), Cpu.self()};
    Map<Long, Cpu.ThreadTime> threadsAtStart = service.threads();
    long commitsAtStart = commits();
    String windowOpened = Db.column("SELECT now()::text").get(0);
    window.set(1, window.get(0) + TimeUnit.SECONDS.toNanos(seconds));
    ScheduledExecutorService sampler = Executors.newSingleThreadScheduledExecutor();
    // The most resident memory in each minute of the window: a replica that grows shows it here.
    Map<Integer, Long> rssByMinute = new ConcurrentHashMap<>();
    sampler.scheduleAtFixedRate(
        () -> {
          long now = service.residentMiB();
          peakRss.accumulateAndGet(now, Math::max);
          int minute = (int) ((System.nanoTime() - window.get(0)) / 60_000_000_000L);
          rssByMinute.merge(minute, now, Math::max);
        },
        0,
        1,
        TimeUnit.SECONDS);
    claiming.shutdown();
    claiming.awaitTermination(seconds + 60, TimeUnit.SECONDS);
    // Let the last beats of the window come back.
    Thread.sleep(Math.max(0, (window.get(1) - System.nanoTime()) / 1_000_000) + 5000);
    sampler.shutdownNow();
    scraper.shutdownNow();
    Map<String, Double> metrics = serviceMetrics(service);
    long committed = commits() - commitsAtStart;
    // A simulated instance whose lease ran out keeps beating and is answered 410 at every beat:
    // how many instances that is, and whether they died before the window or in it.
    List<String> died =
        Db.column(
            "SELECT count(*) FILTER (WHERE ended_at < ?::timestamptz) || ' before the window, '"
                + " || count(*) FILTER (WHERE ended_at >= ?::timestamptz) || ' in it'"
                + " FROM rollcall.instances WHERE namespace = ? AND deployment_id = 'fleet'"
                + " AND state = 'dead'",
            windowOpened,
            windowOpened,
            fleetNamespace);
    // When they died, by the second after the whole fleet had registered (negative: before).
    String diedWhen =
        Db.column(
                "SELECT coalesce(string_agg(s || ' s: ' || n, ', ' ORDER BY s), 'none') FROM"
                    + " (SELECT floor(extract(epoch FROM ended_at - ?::timestamptz))::int AS s,"
                    + " count(*) AS n FROM rollcall.instances WHERE namespace = ?"
                    + " AND deployment_id = 'fleet' AND state = 'dead' GROUP BY 1) d",
                fleetRegistered,
                fleetNamespace)
            .get(0);
    metricsAtStart.forEach((k, v) -> metrics.merge(k, -v, Double::sum));
    double elapsed = (System.nanoTime() - window.get(0)) / 1e9;
    double flushes = metrics.getOrDefault("rollcall_heartbeat_flush_beats_count", 0.0);
    double flushed = metrics.getOrDefault("rollcall_heartbeat_flush_beats_sum", 0.0);
    String beatUri = "{uri=\"/instances/{id}/heartbeat\"}";
    double served = metrics.getOrDefault("http_server_requests_seconds_count" + beatUri, 0.0);
    double servedSeconds = metrics.getOrDefault("http_server_requests_seconds_sum" + beatUri, 0.0);
    long rss = Math.max(peakRss.get(), service.residentMiB());
    long peakSinceStart = service.peakResidentMiB();
    // The service's JIT compilers during the window: seconds of CPU, C1 and C2.
    Map<String, Long> byThread = Cpu.usedByName(threadsAtStart, service.threads());
    double c1 = byThread.getOrDefault("C1 CompilerThre", 0L) / 1000.0;
    double c2 = byThread.getOrDefault("C2 CompilerThre", 0L) / 1000.0;
    beats.shutdownNow();
    vertx.close();
    double serviceCores = (service.cpuMillis() - cpuAtStart[0]) / 1000.0 / elapsed;
    double postgresCores = (Cpu.postgres() - cpuAtStart[1]) / 1000.0 / elapsed;
    double driverCores = (Cpu.self() - cpuAtStart[2]) / 1000.0 / elapsed;
    System.out.printf(
        "%nService load (%d instances of namespace %s heartbeating every %d ms%s, %d claimers,"
            + " %d s)%n"
            + "  heartbeats  %6d (%.0f/s)  p50 %d ms  p99 %d ms  (open loop: from when due;"
            + " %d leases lost: answers 410)%n"
            + "  instances declared dead: %s (by second after the fleet registered: %s)%n"
            + "  claims      %6d (%.0f/s)  p50 %d ms  p99 %d ms  (%s; %d batches, %d runs"
            + " handed out)%n"
            + "  with a batch %5d         p50 %d ms  p99 %d ms%n"
            + "  claims left the claimer late by p50 %d ms, p99 %d ms; from when sent p50 %d ms,"
            + " p99 %d ms; in the service's claim code p50 ≤ %d ms, p99 ≤ %d ms (%.0f claims,"
            + " its histogram's bucket bounds)%n"
            + "  heartbeats waited (for their instance's outstanding beat, then a connection of this"
            + " driver) p50 %d ms, p99 %d ms, then were"
            + " answered in p50 %d ms, p99 %d ms; in the warm-up (registration included) waited p50"
            + " %d ms, p99 %d ms, answered in p50 %d ms, p99 %d ms%n"
            + "  beats that fell due while their instance's last was outstanding and went with"
            + " the next: %d in the window, %d before it (%s)%n"
            + "  registering %d instances took %d ms; the window opened %d s later, at %s (the"
            + " database's clock, to line up with a service's GC log)%n"
            + "  errors      %s%n"
            + "  service     heartbeats served in %.1f ms on average (from the request's arrival);"
            + " %.0f heartbeat transactions, %.1f heartbeats each; the database committed"
            + " %.0f transactions a second%n"
            + "  CPU         service %.2f, PostgreSQL %.2f, this driver %.2f cores over %.0f s;"
            + " the service's JIT compilers %.2f s (C1 %.2f, C2 %.2f) of it%n"
            + "  p99 by 10 s of the window the requests were due in: heartbeats %s ms, claims %s"
            + " ms%n"
            + "  heartbeats over 250 ms, by second of the window they were due in: %s%n"
            + "  claims       first of their instance (joining or opening a deploy's pass) %d,"
            + " p50 %d ms, p99 %d ms; later %d, p50 %d ms, p99 %d ms%n"
            + "  claims over 100 ms, by the claimer's claim of its deploy and the answer: %s;"
            + " by second of the 5 s deploy slot they were due in: %s%n"
            + "  idle looks  %6d (%.0f/s)  p50 %d ms  p99 %d ms  (%s; answers %s)%n"
            + "  service RSS %d MiB at most in the window; %d MiB at its peak since it started"
            + " (VmHWM: registration, warm-up and compilers included); at most by minute of the"
            + " window: %s MiB%n"
            + "  scrapes     %s%n"
            + "  load average %s%n%n",
        instanceCount,
        fleetNamespace,
        periodMs,
        (holders.isEmpty() ? "" : ", reporting held session locks")
            + (inFlightSize >= 0
                ? String.format(
                    ", %d in flight each, %d of them new at every %s",
                    inFlightSize,
                    Math.min(inFlightChanges, inFlightSize),
                    changeEvery > 1 ? changeEvery + "th beat" : "beat")
                : ""),
        claimerCount,
        seconds,
        heartbeatMs.size(),
        heartbeatMs.size() / (double) seconds,
        percentile(heartbeatMs, 0.50),
        percentile(heartbeatMs, 0.99),
        leasesLost.get(),
        died.get(0),
        diedWhen,
        claimMs.size(),
        claimMs.size() / (double) seconds,
        percentile(claimMs, 0.50),
        percentile(claimMs, 0.99),
        claimPeriodNanos == 0
            ? "back to back"
            : "each claimer every "
                + claimPeriodNanos / 1_000_000
                + " ms, open loop: from when due",
        batchesHandedOut.get(),
        runsHandedOut.get(),
        batchClaimMs.size(),
        percentile(batchClaimMs, 0.50),
        percentile(batchClaimMs, 0.99),
        percentile(claimSentLateMs, 0.50),
        percentile(claimSentLateMs, 0.99),
        percentile(claimFromSentMs, 0.50),
        percentile(claimFromSentMs, 0.99),
        histogramPercentileMs(metrics, "rollcall_claim_seconds", 0.50),
        histogramPercentileMs(metrics, "rollcall_claim_seconds", 0.99),
        metrics.getOrDefault("rollcall_claim_seconds_count", 0.0),
        percentile(windowBeats.waited, 0.50),
        percentile(windowBeats.waited, 0.99),
        percentile(windowBeats.answered, 0.50),
        percentile(windowBeats.answered, 0.99),
        percentile(warmUpBeats.waited, 0.50),
        percentile(warmUpBeats.waited, 0.99),
        percentile(warmUpBeats.answered, 0.50),
        percentile(warmUpBeats.answered, 0.99),
        mergedInWindow.get(),
        mergedBefore.get(),
        oneAtATime
            ? "one beat outstanding per instance, as a client"
            : "off: every beat sent when due",
        instanceCount,
        registerMs,
        warmUp,
        windowOpened,
        errorsByKind.isEmpty() ? "none" : errorsByKind.toString(),
        served < 0.5 ? 0.0 : 1000 * servedSeconds / served,
        flushes,
        flushes < 0.5 ? 0.0 : flushed / flushes,
        committed / elapsed,
        serviceCores,
        postgresCores,
        driverCores,
        elapsed,
        c1 + c2,
        c1,
        c2,
        p99ByPart(beatsByPart),
        p99ByPart(claimsByPart),
        new java.util.TreeMap<>(slowBySecond),
        firstClaimMs.size(),
        percentile(firstClaimMs, 0.50),
        percentile(firstClaimMs, 0.99),
        laterClaimMs.size(),
        percentile(laterClaimMs, 0.50),
        percentile(laterClaimMs, 0.99),
        new java.util.TreeMap<>(slowClaims),
        new java.util.TreeMap<>(slowClaimsBySlotSecond),
        idleLookLatencies.size(),
        idleLookLatencies.size() / (double) seconds,
        percentile(idleLookLatencies, 0.50),
        percentile(idleLookLatencies, 0.99),
        idleLookMs > 0
            ? "each fleet instance every " + idleLookMs + " ms, open loop: from when due"
            : "off: -Dbench.idle-look-ms",
        new java.util.TreeMap<>(idleAnswers),
        rss,
        peakSinceStart,
        new java.util.TreeMap<>(rssByMinute).values(),
        scrapeSeconds > 0
            ? String.format(
                "%d of /q/metrics every %d s from before registration (p50 %d ms, max %d ms,"
                    + " %d failed)",
                scrapeMs.size(),
                scrapeSeconds,
                percentile(scrapeMs, 0.50),
                percentile(scrapeMs, 1.0),
                scrapeErrors.get())
            : "off: -Dbench.scrape-seconds",
        loadAverage());
    long waitP99 = percentile(windowBeats.waited, 0.99);
    long lateP99 = percentile(claimSentLateMs, 0.99);
    results.ifPresent(
        file ->
            file.append(
                new LoadRow(
                        instanceCount,
                        periodMs,
                        claimerCount,
                        seconds,
                        heartbeatMs.size() / (double) seconds,
                        percentile(heartbeatMs, 0.50),
                        percentile(heartbeatMs, 0.99),
                        percentile(claimMs, 0.50),
                        percentile(claimMs, 0.99),
                        flushes < 0.5 ? 0.0 : flushed / flushes,
                        serviceCores,
                        postgresCores,
                        driverCores,
                        waitP99,
                        lateP99,
                        errorsByKind.values().stream().mapToLong(AtomicLong::get).sum(),
                        leasesLost.get(),
                        rss)
                    .row()));
    return new LoadFigures(
        percentile(heartbeatMs, 0.50),
        percentile(heartbeatMs, 0.99),
        percentile(claimMs, 0.50),
        percentile(claimMs, 0.99));
  }

  /** Transactions the test database has committed so far (every session's). */
  private static long commits() {
    return Db.number("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()");
  }

  /** The first column of the first row of {@code sql} on {@code c}, as text. */
  private static String one(Connection c, String sql, Object... params)
      throws java.sql.SQLException {
    try (java.sql.PreparedStatement st = c.prepareStatement(sql)) {
      for (int p = 0; p < params.length; p++) {
        st.setObject(p + 1, params[p]);
      }
      try (java.sql.ResultSet rs = st.executeQuery()) {
        rs.next();
        return rs.getString(1);
      }
    }
  }

  /**
   * Sends the instance's idle claim (answered at once: {@code waitMs} 0) every {@code everyMs},
   * open loop from a random phase; those due inside the window count, from when they were due.
   */
  private static void lookEvery(
      Instance instance,
      long everyMs,
      HttpClient http,
      ScheduledExecutorService timer,
      AtomicLongArray window,
      ConcurrentLinkedQueue<Long> latencies,
      Map<String, Integer> answers,
      Map<String, AtomicLong> errors) {
    RequestOptions look =
        new RequestOptions()
            .setMethod(HttpMethod.POST)
            .setURI("/recovery/claim")
            .putHeader("Authorization", "Bearer " + instance.token())
            .putHeader("Content-Type", "application/json")
            .setTimeout(30_000);
    io.vertx.core.buffer.Buffer body =
        io.vertx.core.buffer.Buffer.buffer("{\"maxRuns\":500,\"waitMs\":0,\"idle\":true}");
    SimulatedFleet.openLoop(
        timer,
        everyMs,
        window,
        (due, counted) ->
            http.request(look)
                .compose(
                    request ->
                        request
                            .send(body)
                            .compose(r -> r.body().map(b -> Map.entry(r.statusCode(), b))))
                .onComplete(
                    reply -> {
                      if (!counted) {
                        return;
                      }
                      latencies.add((System.nanoTime() - due) / 1_000_000);
                      if (reply.failed()) {
                        error(errors, "idle look " + reply.cause().getClass().getSimpleName());
                      } else if (reply.result().getKey() != 200) {
                        error(errors, "idle look " + reply.result().getKey());
                      } else {
                        answers.merge(
                            status(reply.result().getValue().toString()), 1, Integer::sum);
                      }
                    }));
  }

  /**
   * One instance's heartbeats as its client sends them: at most one outstanding. A beat that falls
   * due while one is outstanding waits and is sent as soon as that one is answered; several that
   * fall due meanwhile go as one, the earliest's due time kept, so its latency counts from the
   * first of them (open loop: the wait is charged, not hidden). Off, every beat is sent when due.
   */
  static final class OneBeatAtATime {
    static final long NONE = Long.MIN_VALUE;

    enum Due {
      /** Send it now. */
      SEND,
      /** It waits for the outstanding beat's answer. */
      WAITS,
      /** It goes with an earlier beat that already waits for that answer. */
      MERGED
    }

    private final boolean on;
    private boolean outstanding;
    private long waiting = NONE;

    OneBeatAtATime(boolean on) {
      this.on = on;
    }

    /** A beat fell due at {@code due}: what to do with it. */
    synchronized Due due(long due) {
      if (!on || !outstanding) {
        outstanding = true;
        return Due.SEND;
      }
      if (waiting != NONE) {
        return Due.MERGED;
      }
      waiting = due;
      return Due.WAITS;
    }

    /**
     * The outstanding beat was answered (or failed): the due time of the beat to send now, or
     * {@link #NONE}.
     */
    synchronized long answered() {
      if (!on) {
        return NONE;
      }
      long next = waiting;
      waiting = NONE;
      outstanding = next != NONE;
      return next;
    }
  }

  /** Requests' time in two parts, in ms: waiting for a connection, then sent and answered. */
  private static final class Split {
    final ConcurrentLinkedQueue<Long> waited = new ConcurrentLinkedQueue<>();
    final ConcurrentLinkedQueue<Long> answered = new ConcurrentLinkedQueue<>();

    void add(long waitedNanos, long answeredNanos) {
      waited.add(Math.max(0, waitedNanos) / 1_000_000);
      answered.add(answeredNanos / 1_000_000);
    }
  }

  /** A claim answer's status ("done", "wait", "batch"). */
  private static String status(String json) {
    try {
      return Api.JSON.readTree(json).path("status").asText("?");
    } catch (java.io.IOException e) {
      return "unreadable";
    }
  }

  /** The latencies of requests due in the same 10 s part of the window as {@code due}. */
  private static ConcurrentLinkedQueue<Long> byPart(
      Map<Integer, ConcurrentLinkedQueue<Long>> parts, AtomicLongArray window, long due) {
    return parts.computeIfAbsent(
        (int) ((due - window.get(0)) / 10_000_000_000L), k -> new ConcurrentLinkedQueue<>());
  }

  /** Each 10 s part's p99, in order: "[12, 9, 10]". */
  private static String p99ByPart(Map<Integer, ConcurrentLinkedQueue<Long>> parts) {
    return new java.util.TreeMap<>(parts)
        .values().stream().map(q -> String.valueOf(percentile(q, 0.99))).toList().toString();
  }

  /** The service's request and flush metrics; empty if it cannot answer (reported as 0). */
  private static Map<String, Double> serviceMetrics(ServiceProcess service) {
    Map<String, Double> m = new java.util.TreeMap<>();
    try {
      m.putAll(service.metrics("http_server_requests_seconds_", List.of("uri")));
      m.putAll(service.metrics("rollcall_heartbeat_flush_beats_", List.of()));
      m.putAll(service.metrics("rollcall_claim_seconds_", List.of("le")));
    } catch (RuntimeException e) {
      System.out.println("service metrics not read: " + e);
    }
    return m;
  }

  /**
   * The bucket bound (ms) under which a fraction {@code p} of a Prometheus histogram's samples
   * fall: an upper bound of that percentile, as fine as the service's buckets. -1 without samples.
   */
  static long histogramPercentileMs(Map<String, Double> metrics, String name, double p) {
    java.util.TreeMap<Double, Double> buckets = new java.util.TreeMap<>();
    String prefix = name + "_bucket{le=\"";
    metrics.forEach(
        (k, v) -> {
          if (k.startsWith(prefix)) {
            String le = k.substring(prefix.length(), k.length() - 2);
            buckets.put(le.equals("+Inf") ? Double.POSITIVE_INFINITY : Double.parseDouble(le), v);
          }
        });
    double total = buckets.isEmpty() ? 0 : buckets.lastEntry().getValue();
    if (total < 0.5) {
      return -1;
    }
    for (Map.Entry<Double, Double> b : buckets.entrySet()) {
      if (b.getValue() >= p * total) {
        return b.getKey().isInfinite() ? Long.MAX_VALUE : Math.round(b.getKey() * 1000);
      }
    }
    return Long.MAX_VALUE;
  }

  private static String loadAverage() {
    try {
      return java.nio.file.Files.readString(java.nio.file.Path.of("/proc/loadavg")).trim();
    } catch (java.io.IOException e) {
      return "unknown";
    }
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
    if (ms <= 0) {
      return;
    }
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /**
   * A heartbeat's body: the session report (JSON members, or empty) and, unless {@code size} is
   * negative, an in-flight set of {@code size} executions of instance {@code me}, numbered from
   * {@code first} (a set that moves on by C executions a beat starts C further each time).
   */
  /**
   * The queue jobs of every fleet instance's first in-flight set ({@link #heartbeatBody} with
   * {@code first} 0), keyed by their message ids, as the engine keys its jobs.
   */
  private static void addJobs(int instances, int size) {
    Db.number(
        "SELECT count(graphile_worker.add_job('workflow_flows',"
            + " json_build_object('messageId', 'load-message-' || me || '-' || k),"
            + " job_key => 'load-message-' || me || '-' || k))"
            + " FROM generate_series(0, ? - 1) me, generate_series(0, ? - 1) k",
        instances,
        size);
  }

  /**
   * Instance {@code me}'s jobs (those of its first set) locked by its one worker, as a worker holds
   * the jobs it executes.
   */
  private static void lockJobs(Connection worker, int me, int size) throws java.sql.SQLException {
    String locked =
        one(
            worker,
            "WITH l AS (UPDATE graphile_worker._private_jobs SET locked_by = 'load-worker-' || ?,"
                + " locked_at = now() WHERE key = ANY(ARRAY(SELECT 'load-message-' || ? || '-' || k"
                + " FROM generate_series(0, ? - 1) k)) RETURNING 1) SELECT count(*)::text FROM l",
            me,
            me,
            size);
    if (Integer.parseInt(locked) != size) {
      throw new IllegalStateException("instance " + me + ": " + locked + " of " + size + " locked");
    }
  }

  static String heartbeatBody(int me, String sessionReport, int size, long first) {
    StringBuilder body = new StringBuilder("{").append(sessionReport);
    if (size >= 0) {
      body.append(sessionReport.isEmpty() ? "" : ",").append("\"inFlight\":[");
      for (long k = first; k < first + size; k++) {
        body.append(k == first ? "" : ",")
            .append("{\"runId\":\"load-run-")
            .append(me)
            .append('-')
            .append(k)
            .append("\",\"messageId\":\"load-message-")
            .append(me)
            .append('-')
            .append(k)
            .append("\"}");
      }
      body.append(']');
    }
    return body.append('}').toString();
  }
}
