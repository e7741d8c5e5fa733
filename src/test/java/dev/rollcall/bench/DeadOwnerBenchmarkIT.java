package dev.rollcall.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.rollcall.testing.EngineFixture;
import dev.rollcall.testing.EngineMix;
import dev.rollcall.testing.NodeReplica;
import dev.rollcall.testing.ServiceProcess;
import dev.rollcall.testing.SourceTables;
import dev.rollcall.testing.TestDatabase;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import java.util.stream.StreamSupport;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Dead owners as they really die: application replicas ({@code bench/replica.mjs}, the engine with
 * the Rollcall client) holding in-flight runs are killed with SIGKILL, or leave gracefully, at
 * random moments, against the packaged service with its default timings (heartbeat 3 s, lease TTL
 * 10 s, reaper 1 s). A survivor replica stays up throughout; every replica reports each batch that
 * reaches its enqueuer. Prints p50/p99/max from the kill (or the leave command) to the first claim
 * of the dead replica's takeover batch, where that time goes, and the targets of issue 7.
 *
 * <p>{@code ./mvnw -B verify -Pbench -Dtest=none -Dsurefire.failIfNoSpecifiedTests=false
 * -Dit.test=DeadOwnerBenchmarkIT} ({@code -Dbench.kills=50 -Dbench.leaves=10 -Dbench.live=10
 * -Dbench.seed=…}).
 */
@Tag("benchmark")
class DeadOwnerBenchmarkIT {

  /** Runs each victim executes, all its own. */
  static final int RUNS_PER_VICTIM = 5;

  /** Issue 7's targets: p99 of kill → takeover claimed, and of leave → takeover claimed. */
  static final long KILL_TARGET_MS = 12_000;

  static final long LEAVE_TARGET_MS = 1_000;

  /** Issue 15's target: p99 of kill → takeover epoch open, with the session lock held. */
  static final long KILL_OPENED_TARGET_MS = 2_000;

  static final Duration BOOT = Duration.ofSeconds(120);

  /** Longest wait for the last takeovers once every victim is gone: far past lease + reaper. */
  static final Duration SETTLE = Duration.ofSeconds(60);

  /** One victim: how it ended, when, and what it held. */
  record Victim(
      String kind, NodeReplica replica, String instanceId, List<String> runIds, long endedAt) {}

  /** The first claim of a victim's takeover: when, by whom, and which of its runs. */
  record Claim(long at, String by, List<String> runIds) {}

  @Test
  void killedAndDepartedReplicasAreTakenOver() throws Exception {
    int kills = Integer.getInteger("bench.kills", 50);
    int leaves = Integer.getInteger("bench.leaves", 10);
    int live = Integer.getInteger("bench.live", 10);
    long seed = Long.getLong("bench.seed", System.nanoTime());
    NodeReplica.install();
    try (TestDatabase db = TestDatabase.start()) {
      SourceTables.create(db);
      EngineFixture.setUpSchemas(db);
      EngineMix.seed(db, 2_000, 0, List.of("pending"));
      try (ServiceProcess service =
          ServiceProcess.start("dead-owner", db, SourceTables.namespaceSettings())) {
        new Scenario(db, service, seed).run(kills, leaves, live);
      }
    }
  }

  private static final class Scenario {
    private final TestDatabase db;
    private final Map<String, Object> client = new LinkedHashMap<>();
    private final Random random;
    private final long seed;
    private final List<NodeReplica> replicas = Collections.synchronizedList(new ArrayList<>());

    Scenario(TestDatabase db, ServiceProcess service, long seed) {
      this.db = db;
      this.seed = seed;
      this.random = new Random(seed);
      client.put("mode", "rollcall");
      client.put("url", service.base().toString());
      client.put("namespace", SourceTables.ENGINE);
      client.put("secret", SourceTables.secret(SourceTables.ENGINE));
      client.put("deploymentId", "deploy-" + UUID.randomUUID());
      client.put("stayAlive", true);
    }

    void run(int kills, int leaves, int live) throws Exception {
      // The deploy's boot recovery first, by the survivor alone: every later batch is a takeover.
      NodeReplica survivor = NodeReplica.start("dead-owner-survivor", db, client);
      replicas.add(survivor);
      JsonNode boot = survivor.await("recovered", BOOT);
      System.out.printf(
          "%nDead-owner benchmark (seed %d, %d cores, load %s): boot recovery by the survivor %s"
              + " in %d ms%n",
          seed,
          Runtime.getRuntime().availableProcessors(),
          Latencies.loadAverage(),
          boot.at("/outcome/status").asText(),
          boot.path("elapsedMs").asLong());

      List<String> kinds = new ArrayList<>();
      IntStream.range(0, kills).forEach(i -> kinds.add("kill"));
      IntStream.range(0, leaves).forEach(i -> kinds.add("leave"));
      Collections.shuffle(kinds, random);
      List<Long> pauses = kinds.stream().map(k -> 1_000L + random.nextInt(5_001)).toList();
      ExecutorService slots = Executors.newFixedThreadPool(live);
      List<Future<Victim>> running = new ArrayList<>();
      try {
        for (int i = 0; i < kinds.size(); i++) {
          int n = i;
          running.add(slots.submit(() -> victim(n, kinds.get(n), pauses.get(n))));
        }
        List<Victim> victims = new ArrayList<>();
        for (Future<Victim> f : running) {
          victims.add(f.get());
        }
        Map<String, Claim> claims = awaitTakeovers(victims);
        report(victims, claims);
        long never = victims.stream().filter(v -> !claims.containsKey(v.instanceId())).count();
        assertEquals(0, never, "victims never taken over");
        // Taken over means enqueued: a claimer killed with the batch in hand does not count (its
        // batch comes back once its own death is noticed).
        List<String> lost = notEnqueued(victims);
        for (long until = System.nanoTime() + SETTLE.toNanos();
            !lost.isEmpty() && System.nanoTime() < until;
            lost = notEnqueued(victims)) {
          Thread.sleep(1_000);
        }
        assertEquals(List.of(), lost, "victims whose runs were not all enqueued");
        for (Victim v : victims) {
          assertEquals(
              v.runIds().stream().sorted().toList(),
              claims.get(v.instanceId()).runIds().stream().sorted().toList(),
              v.replica().name() + ": its takeover hands out exactly its in-flight runs");
        }
        // Once the survivor had recovered the deploy, every batch was a takeover.
        long booted = boot.path("t").asLong();
        assertEquals(
            List.of(),
            claimed().stream()
                .filter(e -> e.path("t").asLong() > booted)
                .filter(e -> !e.path("epochKind").asText().equals("takeover"))
                .toList(),
            "batches other than takeovers after the boot recovery");
      } finally {
        slots.shutdownNow();
        for (NodeReplica r : replicas) {
          r.close();
        }
      }
    }

    /** Starts one victim with runs of its own, lets it settle, then kills it or makes it leave. */
    private Victim victim(int n, String kind, long pauseMs) throws Exception {
      List<String> runIds = newRuns(n);
      Map<String, Object> config = new HashMap<>(client);
      config.put("inFlight", runIds);
      NodeReplica replica = NodeReplica.start("dead-owner-victim-" + n, db, config);
      replicas.add(replica);
      String instanceId = replica.await("registered", BOOT).path("instanceId").asText();
      replica.await("recovered", BOOT);
      // Heartbeating with its in-flight set (its first beat went out right after registering).
      Thread.sleep(pauseMs);
      long endedAt = System.currentTimeMillis();
      if (kind.equals("kill")) {
        replica.kill();
      } else {
        replica.send("leave");
        replica.await("result", Duration.ofSeconds(30));
        // The slot's next victim would register right away and claim the takeover at its boot:
        // a replica started as another leaves. Only the peers already running may claim it.
        long until = System.nanoTime() + SETTLE.toNanos();
        while (!firstClaims().containsKey(instanceId) && System.nanoTime() < until) {
          Thread.sleep(50);
        }
      }
      return new Victim(kind, replica, instanceId, runIds, endedAt);
    }

    /**
     * Adds {@link #RUNS_PER_VICTIM} pending runs for victim {@code n} now, created after the boot
     * epoch's snapshot (so no boot pass re-drives them) and with no queue job (so their takeover
     * has no live wake path and re-drives them).
     */
    private List<String> newRuns(int n) {
      List<String> ids = new ArrayList<>();
      for (int i = 0; i < RUNS_PER_VICTIM; i++) {
        ids.add(String.format("wrun_%026d", 1_000_000_000L + (long) n * RUNS_PER_VICTIM + i));
      }
      db.update(
          "INSERT INTO workflow.workflow_runs (id, deployment_id, status, name, created_at,"
              + " updated_at, execution_context) SELECT id, 'postgres', 'pending',"
              + " 'workflow//./src/workflows/flow0//run', now() AT TIME ZONE 'UTC',"
              + " now() AT TIME ZONE 'UTC', '{}'::jsonb FROM unnest(?::text[]) AS id",
          (Object) ids.toArray(String[]::new));
      return ids;
    }

    /** Every {@code claimed} event of every replica so far. */
    private List<JsonNode> claimed() {
      List<NodeReplica> all;
      synchronized (replicas) {
        all = List.copyOf(replicas);
      }
      return all.stream()
          .flatMap(
              r ->
                  r.events("claimed").stream()
                      .map(e -> (JsonNode) ((ObjectNode) e.deepCopy()).put("by", r.name())))
          .toList();
    }

    /** Waits until every victim's takeover was claimed, or {@link #SETTLE} ran out. */
    private Map<String, Claim> awaitTakeovers(List<Victim> victims) throws InterruptedException {
      long deadline = System.nanoTime() + SETTLE.toNanos();
      for (; ; ) {
        Map<String, Claim> claims = firstClaims();
        boolean all = victims.stream().allMatch(v -> claims.containsKey(v.instanceId()));
        if (all || System.nanoTime() > deadline) {
          return claims;
        }
        Thread.sleep(250);
      }
    }

    /** Per dead instance, the first takeover batch any replica claimed for it. */
    private Map<String, Claim> firstClaims() {
      Map<String, Claim> first = new HashMap<>();
      for (JsonNode e : claimed()) {
        if (!e.path("epochKind").asText().equals("takeover")) {
          continue;
        }
        List<String> runs =
            StreamSupport.stream(e.path("runIds").spliterator(), false)
                .map(JsonNode::asText)
                .toList();
        for (JsonNode dead : e.path("deadInstanceIds")) {
          Claim c = new Claim(e.path("t").asLong(), e.path("by").asText(), runs);
          first.merge(dead.asText(), c, (a, b) -> a.at() <= b.at() ? a : b);
        }
      }
      return first;
    }

    private void report(List<Victim> victims, Map<String, Claim> claims) {
      Map<String, long[]> epochs = takeoverTimes();
      List<String> lines = new ArrayList<>();
      for (String kind : List.of("kill", "leave")) {
        List<Victim> of = victims.stream().filter(v -> v.kind().equals(kind)).toList();
        List<Long> total = new ArrayList<>();
        List<Long> toExpiry = new ArrayList<>();
        List<Long> toOpened = new ArrayList<>();
        List<Long> toClaimed = new ArrayList<>();
        List<Long> toFirstLease = new ArrayList<>();
        List<Long> killToOpened = new ArrayList<>();
        Map<String, Integer> proofs = new java.util.TreeMap<>();
        int bySurvivor = 0;
        for (Victim v : of) {
          Claim c = claims.get(v.instanceId());
          if (c == null) {
            continue;
          }
          total.add(c.at() - v.endedAt());
          if (c.by().endsWith("survivor")) {
            bySurvivor++;
          }
          long[] e = epochs.get(v.instanceId());
          if (e != null) {
            long opened = e[0];
            if (kind.equals("kill")) {
              toExpiry.add(e[1] - v.endedAt());
              toOpened.add(opened - e[1]);
              killToOpened.add(opened - v.endedAt());
              proofs.merge(proofOf(v.instanceId()), 1, Integer::sum);
            } else {
              toOpened.add(opened - v.endedAt());
            }
            toClaimed.add(c.at() - opened);
            if (e[2] >= 0) {
              toFirstLease.add(e[2] - v.endedAt());
            }
          }
        }
        int never = of.size() - total.size();
        boolean kill = kind.equals("kill");
        long target = kill ? KILL_TARGET_MS : LEAVE_TARGET_MS;
        System.out.printf(
            "%n  %s → takeover batch claimed: %s%s; %d of %d claimed by the survivor, the"
                + " others by a live victim%n",
            kill ? "kill -9" : "graceful leave",
            Latencies.summary(total),
            never > 0 ? ", " + never + " NEVER TAKEN OVER" : "",
            bySurvivor,
            total.size());
        if (kill) {
          // The evidence: the lease running out, or the session lock first seen missing.
          System.out.printf("    deaths by proof:                 %s%n", proofs);
          System.out.printf(
              "    kill → death evidence:           %s%n", Latencies.summary(toExpiry));
          System.out.printf(
              "    evidence → takeover opened:      %s%n", Latencies.summary(toOpened));
          System.out.printf(
              "    kill → takeover opened:          %s (target p99 ≤ %d ms)%n",
              Latencies.summary(killToOpened), KILL_OPENED_TARGET_MS);
          lines.add(
              Latencies.markdownRow(
                  "`kill -9` of a replica",
                  "takeover epoch open",
                  killToOpened,
                  0,
                  KILL_OPENED_TARGET_MS));
        } else {
          System.out.printf(
              "    leave → takeover opened:         %s%n", Latencies.summary(toOpened));
        }
        System.out.printf(
            "    takeover opened → claimed:       %s%n", Latencies.summary(toClaimed));
        // A holder killed with the batch in hand before its enqueuer saw it: the batch comes
        // back only once that holder's own death is noticed. The first lease leaves that out.
        System.out.printf(
            "    (%s → first leased, whoever held it: %s)%n",
            kill ? "kill" : "leave", Latencies.summary(toFirstLease));
        lines.add(
            Latencies.markdownRow(
                kill ? "`kill -9` of a replica" : "graceful leave (`client.stop()`)",
                "takeover batch claimed",
                total,
                never,
                target));
      }
      printSlowest(victims, claims);
      System.out.printf("%n  load average at the end: %s%n", Latencies.loadAverage());
      System.out.printf(
          "%n| from | to | n | p50 | p99 | max | target (p99) | met |%n"
              + "|---|---|---|---|---|---|---|---|%n%s%n",
          String.join("\n", lines));
    }

    /** The victims taken over last, with their takeover's batches as the service saw them. */
    private void printSlowest(List<Victim> victims, Map<String, Claim> claims) {
      System.out.printf("%n  slowest takeovers (ms after the kill or leave):%n");
      Map<String, Long> endedByName = new HashMap<>();
      victims.forEach(v -> endedByName.put(v.replica().name(), v.endedAt()));
      victims.stream()
          .filter(v -> claims.containsKey(v.instanceId()))
          .collect(Collectors.groupingBy(Victim::kind))
          .values()
          .stream()
          .flatMap(of -> slowest(of, claims, 3).stream())
          .forEach(
              v -> {
                Claim c = claims.get(v.instanceId());
                System.out.printf(
                    "    %s %s: first claimed by %s after %d; hand-outs %s%n",
                    v.kind(),
                    v.replica().name(),
                    c.by(),
                    c.at() - v.endedAt(),
                    handOuts(v, endedByName));
              });
    }

    /** The {@code n} victims of one kind taken over last. */
    private static List<Victim> slowest(List<Victim> of, Map<String, Claim> claims, int n) {
      return of.stream()
          .sorted(
              (a, b) ->
                  Long.compare(
                      claims.get(b.instanceId()).at() - b.endedAt(),
                      claims.get(a.instanceId()).at() - a.endedAt()))
          .limit(n)
          .toList();
    }

    /**
     * Each lease of the victim's takeover batches: fence, holder, ms after the victim's end,
     * outcome, and when the holder itself was killed or left, if it was a victim.
     */
    private List<String> handOuts(Victim v, Map<String, Long> endedByName) {
      return db
          .rows(
              "SELECT l.fence, i.name, (extract(epoch FROM min(l.recorded_at)) * 1000)::bigint,"
                  + " string_agg(DISTINCT l.outcome, '/') FROM rollcall.epochs e"
                  + " JOIN rollcall.ledger l ON l.epoch_id = e.id"
                  + " LEFT JOIN rollcall.instances i ON i.id = l.instance_id"
                  + " WHERE e.subject_instance_id = ?::uuid AND l.batch_id IS NOT NULL"
                  + " GROUP BY l.batch_id, l.fence, i.name ORDER BY l.batch_id, l.fence",
              v.instanceId())
          .stream()
          .map(
              r -> {
                Long holderEnded = endedByName.get(r.get(1));
                return String.format(
                    "fence %s to %s at %d %s%s",
                    r.get(0),
                    r.get(1),
                    Long.parseLong(r.get(2)) - v.endedAt(),
                    r.get(3),
                    holderEnded == null
                        ? ""
                        : " (holder ended at " + (holderEnded - v.endedAt()) + ")");
              })
          .toList();
    }

    /** The proof an instance's death rested on: {@code session-lost} or {@code lease-expired}. */
    private String proofOf(String instanceId) {
      return db.column(
              "SELECT coalesce(end_reason, state) FROM rollcall.instances WHERE id = ?::uuid",
              instanceId)
          .get(0);
    }

    /** Victims whose in-flight runs were not all enqueued by their takeover. */
    private List<String> notEnqueued(List<Victim> victims) {
      return victims.stream()
          .filter(
              v ->
                  db.column(
                              "SELECT DISTINCT l.run_id FROM rollcall.epochs e"
                                  + " JOIN rollcall.ledger l ON l.epoch_id = e.id"
                                  + " WHERE e.subject_instance_id = ?::uuid"
                                  + " AND l.outcome = 'enqueued'",
                              v.instanceId())
                          .size()
                      != v.runIds().size())
          .map(v -> v.replica().name())
          .toList();
    }

    /**
     * Per takeover's subject: {opened, lease expired, first leased (-1: never)} in epoch
     * milliseconds (database clock).
     */
    private Map<String, long[]> takeoverTimes() {
      Map<String, long[]> out = new HashMap<>();
      for (List<String> row :
          db.rows(
              "SELECT e.subject_instance_id::text,"
                  + " (extract(epoch FROM e.created_at) * 1000)::bigint,"
                  + " (extract(epoch FROM coalesce(e.subject_lease_expired_at, e.created_at)) * 1000)"
                  + "::bigint, (extract(epoch FROM (SELECT min(l.recorded_at) FROM rollcall.ledger l"
                  + " WHERE l.epoch_id = e.id AND l.batch_id IS NOT NULL)) * 1000)::bigint"
                  + " FROM rollcall.epochs e WHERE e.kind = 'takeover'")) {
        out.put(
            row.get(0),
            new long[] {
              Long.parseLong(row.get(1)),
              Long.parseLong(row.get(2)),
              row.get(3) == null ? -1 : Long.parseLong(row.get(3))
            });
      }
      return out;
    }
  }
}
