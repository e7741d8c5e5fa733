package dev.rollcall.registry;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.error.Problems.InstanceGone;
import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.Poll;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import dev.rollcall.testing.TimeTravel;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.distribution.HistogramSnapshot;
import jakarta.inject.Inject;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * Heartbeats that arrive while every heartbeat transaction of the replica runs are renewed
 * together, in one transaction, and each still gets its own answer.
 */
@ServiceTest
class CoalescedHeartbeatsTest extends ApiTestBase {

  @Inject Heartbeats instances;
  @Inject MeterRegistry registry;

  private HistogramSnapshot flushes() {
    var summary = registry.find("rollcall.heartbeat.flush.beats").summary();
    return summary == null ? HistogramSnapshot.empty(0, 0, 0) : summary.takeSnapshot();
  }

  /**
   * Keeps every flush of the replica busy (rollcall.heartbeat-flushes is 4): {@code lock} takes the
   * rows of the four {@code holders} in a transaction the caller ends, and each holder's beat waits
   * for its row. Returns those four beats.
   */
  private List<CompletableFuture<Api.Reply>> holdEveryFlush(
      Connection lock, List<Instance> holders, ExecutorService senders) throws Exception {
    lock.setAutoCommit(false);
    try (PreparedStatement st =
        lock.prepareStatement("SELECT 1 FROM rollcall.instances WHERE id = ANY(?) FOR UPDATE")) {
      st.setArray(
          1, lock.createArrayOf("uuid", holders.stream().map(Instance::id).toArray(UUID[]::new)));
      st.executeQuery().close();
    }
    List<CompletableFuture<Api.Reply>> held = new ArrayList<>();
    for (Instance h : holders) {
      held.add(CompletableFuture.supplyAsync(() -> api.heartbeat(h), senders));
    }
    Poll.until(
        "the four flushes wait for the held rows",
        Duration.ofSeconds(10),
        () ->
            Db.number(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                        + " AND query LIKE 'UPDATE rollcall.instances i SET last_heartbeat_at%'")
                == 4);
    return held;
  }

  @Test
  void beatsWaitingForAFlushAreRenewedTogetherEachWithItsOwnAnswer() throws Exception {
    ExecutorService senders = Executors.newFixedThreadPool(40);
    try {
      // rollcall.heartbeat-flushes is 4: four beats whose rows a test transaction holds keep every
      // flush busy.
      List<Instance> holders = new ArrayList<>();
      for (int k = 0; k < 4; k++) {
        holders.add(api.register(SourceTables.SMALL, UUID.randomUUID().toString(), "holder-" + k));
      }
      // Waiting behind them: plain beats, a beat of an instance whose lease ran out, one of an
      // instance whose deploy has recovery work open, and one reporting an in-flight run.
      List<Instance> plain = new ArrayList<>();
      for (int k = 0; k < 26; k++) {
        plain.add(api.register(SourceTables.SMALL, "quiet-deploy", "plain-" + k));
      }
      Instance expired = api.register(SourceTables.SMALL, UUID.randomUUID().toString(), "expired");
      Instance busy = api.register(SourceTables.SMALL, UUID.randomUUID().toString(), "busy");
      api.claimBatch(busy, 5);
      Instance owner = api.register(SourceTables.SMALL, UUID.randomUUID().toString(), "owner");
      String run = Db.activeRuns(SourceTables.SMALL).iterator().next();
      // Each token is known to the replica already (a real fleet's are): the beats below go
      // straight to the flush.
      api.heartbeat(expired).expect(200);
      api.heartbeat(owner).expect(200);
      TimeTravel.leaseExpired(expired);
      long flushesBefore = flushes().count();

      List<CompletableFuture<Api.Reply>> held = new ArrayList<>();
      List<CompletableFuture<Api.Reply>> plainBeats = new ArrayList<>();
      CompletableFuture<Api.Reply> expiredBeat;
      CompletableFuture<Api.Reply> busyBeat;
      CompletableFuture<Api.Reply> ownerBeat;
      try (Connection lock = Db.database().connect()) {
        held.addAll(holdEveryFlush(lock, holders, senders));
        for (Instance p : plain) {
          plainBeats.add(CompletableFuture.supplyAsync(() -> api.heartbeat(p), senders));
        }
        expiredBeat = CompletableFuture.supplyAsync(() -> api.heartbeat(expired), senders);
        busyBeat = CompletableFuture.supplyAsync(() -> api.heartbeat(busy), senders);
        ownerBeat =
            CompletableFuture.supplyAsync(() -> api.heartbeat(owner, List.of(run)), senders);
        Poll.until(
            "29 beats wait for a flush",
            Duration.ofSeconds(10),
            () -> instances.heartbeatsWaiting() == 29);
        lock.rollback();
      }

      for (CompletableFuture<Api.Reply> h : held) {
        h.get(10, TimeUnit.SECONDS).expect(200);
      }
      for (CompletableFuture<Api.Reply> p : plainBeats) {
        assertFalse(
            p.get(10, TimeUnit.SECONDS).expect(200).body().get("recoveryPending").asBoolean());
      }
      expiredBeat.get(10, TimeUnit.SECONDS).expect(410);
      assertTrue(
          busyBeat.get(10, TimeUnit.SECONDS).expect(200).body().get("recoveryPending").asBoolean());
      ownerBeat.get(10, TimeUnit.SECONDS).expect(200);
      assertEquals(
          List.of(run),
          Db.column("SELECT run_id FROM rollcall.ownership WHERE instance_id = ?", owner.id()));
      assertEquals(
          26,
          Db.number(
              "SELECT count(*) FROM rollcall.instances WHERE deployment_id = 'quiet-deploy'"
                  + " AND lease_expires_at > now() + interval '9 seconds'"));
      assertEquals(
          0,
          Db.number(
              "SELECT count(*) FROM rollcall.instances WHERE id = ?"
                  + " AND lease_expires_at > now()",
              expired.id()),
          "an expired lease is not renewed");

      HistogramSnapshot after = flushes();
      assertEquals(5, after.count() - flushesBefore, "four held flushes, then one for the 29");
      assertEquals(29, after.max(), "the 29 waiting beats went together");
    } finally {
      senders.shutdownNow();
    }
  }

  /**
   * The session reports of one flush are recorded in one statement, which reads the lock table
   * once: each instance gets its own verdict, and a report that changes nothing its row records is
   * not looked into (SessionLiveness.changes).
   */
  @Test
  void theSessionReportsOfAFlushAreRecordedTogetherEachOnItsOwn() throws Exception {
    String deploy = "reports-" + UUID.randomUUID();
    Instance seen = api.register(SourceTables.SMALL, deploy, "seen");
    Instance elsewhere = api.register(SourceTables.SMALL, deploy, "elsewhere");
    Instance lost = api.register(SourceTables.SMALL, deploy, "lost");
    Instance quiet = api.register(SourceTables.SMALL, deploy, "quiet");
    Instance sighted = api.register(SourceTables.SMALL, deploy, "sighted");
    try (Connection session = Db.database().connect()) {
      int pid = backendPid(session);
      for (Instance i : List.of(seen, elsewhere, quiet, sighted)) {
        lockFor(session, "pg_advisory_lock", i);
      }
      // Armed already, each by a beat of its own; then their locks go while the session lives.
      for (Instance i : List.of(quiet, sighted)) {
        report(i, SessionLiveness.Report.HELD, pid).get(10, TimeUnit.SECONDS);
        assertEquals("held", sessionLock(i));
        lockFor(session, "pg_advisory_unlock", i);
      }
      // A check saw this one's lock missing.
      Db.update(
          "UPDATE rollcall.instances SET session_missing_since = now() WHERE id = ?", sighted.id());

      for (var b :
          inOneFlush(
              List.of(
                  () -> report(seen, SessionLiveness.Report.HELD, pid),
                  () -> report(elsewhere, SessionLiveness.Report.HELD, pid + 100_000),
                  () -> report(lost, SessionLiveness.Report.LOST, null),
                  () -> report(quiet, SessionLiveness.Report.HELD, pid),
                  () -> report(sighted, SessionLiveness.Report.HELD, pid)))) {
        b.get(10, TimeUnit.SECONDS);
      }
    }
    assertEquals("held", sessionLock(seen), "its lock is held by the reported backend");
    assertEquals("unseen", sessionLock(elsewhere), "the reported backend does not hold it");
    assertEquals("lost", sessionLock(lost));
    assertEquals("held", sessionLock(quiet), "a report that changes nothing is not looked into");
    assertEquals("unseen", sessionLock(sighted), "a sighting makes the report look");
    assertEquals(
        null,
        Db.column("SELECT session_missing_since FROM rollcall.instances WHERE id = ?", sighted.id())
            .get(0));
  }

  /**
   * The in-flight sets of one flush are replaced together (one statement), each instance's on its
   * own: a run one instance drops and another reports moves, an empty set drops everything, of two
   * beats of one instance the last counts, a beat without a set leaves the rows alone, and a
   * message reported again keeps the time it was first reported.
   */
  @Test
  void theInFlightSetsOfAFlushAreReplacedTogetherEachOnItsOwn() throws Exception {
    String deploy = "sets-" + UUID.randomUUID();
    Instance moving = api.register(SourceTables.SMALL, deploy, "moving");
    Instance emptied = api.register(SourceTables.SMALL, deploy, "emptied");
    Instance taking = api.register(SourceTables.SMALL, deploy, "taking");
    Instance twice = api.register(SourceTables.SMALL, deploy, "twice");
    Instance silent = api.register(SourceTables.SMALL, deploy, "silent");
    Instance expired = api.register(SourceTables.SMALL, deploy, "expired");
    String p = "set-" + UUID.randomUUID() + "-";
    setBeat(moving, List.of(InFlight.run(p + "r1"), new InFlight(p + "r2", p + "m2")));
    setBeat(emptied, List.of(new InFlight(p + "r3", p + "m3")));
    setBeat(taking, List.of(InFlight.run(p + "r4")));
    setBeat(twice, List.of(InFlight.run(p + "r5")));
    setBeat(silent, List.of(new InFlight(p + "r6", p + "m6")));
    setBeat(expired, List.of(InFlight.run(p + "r9")));
    TimeTravel.leaseExpired(expired);
    String m2At = reportedAt(moving, p + "m2");

    List<CompletableFuture<Heartbeats.Heartbeat>> beats =
        inOneFlush(
            List.of(
                () ->
                    set(
                        moving,
                        List.of(
                            new InFlight(p + "r2", p + "m2"), new InFlight(p + "r3", p + "m3"))),
                () -> set(emptied, List.of()),
                () -> set(taking, List.of(InFlight.run(p + "r1"))),
                () -> set(twice, List.of(InFlight.run(p + "r7"))),
                () -> set(twice, List.of(InFlight.run(p + "r8"))),
                () -> heartbeat(silent, Optional.empty(), Optional.empty()),
                () -> set(expired, List.of(InFlight.run(p + "r10")))));
    for (var b : beats.subList(0, 6)) {
      b.get(10, TimeUnit.SECONDS);
    }
    var gone = assertThrows(ExecutionException.class, () -> beats.get(6).get(10, TimeUnit.SECONDS));
    assertTrue(gone.getCause() instanceof InstanceGone, gone.toString());
    assertEquals(List.of(p + "r2", p + "r3"), runs(moving));
    assertEquals(List.of(p + "m2", p + "m3"), messages(moving));
    assertEquals(m2At, reportedAt(moving, p + "m2"), "a message reported again keeps its time");
    assertEquals(List.of(), runs(emptied), "an empty set drops every run");
    assertEquals(List.of(), messages(emptied));
    assertEquals(List.of(p + "r1"), runs(taking), "its own set only: the run the other dropped");
    assertEquals(List.of(p + "r8"), runs(twice), "the last of its two beats counts");
    assertEquals(List.of(p + "r6"), runs(silent), "a beat without a set leaves its rows");
    assertEquals(List.of(p + "m6"), messages(silent));
    assertEquals(List.of(p + "r9"), runs(expired), "a beat that renews nothing writes nothing");
  }

  @Test
  void theQueueWorkersOfAFlushAreLearnedInOneStatementFromItsRenewedBeatsOnly() throws Exception {
    String deploy = "learn-" + UUID.randomUUID();
    Instance first = api.register(SourceTables.ENGINE, deploy, "first");
    Instance second = api.register(SourceTables.ENGINE, deploy, "second");
    Instance later = api.register(SourceTables.ENGINE, deploy, "later");
    Instance expired = api.register(SourceTables.ENGINE, deploy, "expired");
    // A namespace without a queue in the same flush: nothing to learn there.
    Instance tableSource = api.register(SourceTables.SMALL, deploy, "table");
    TimeTravel.leaseExpired(expired);
    String p = "learn-" + UUID.randomUUID() + "-";
    List<Long> jobs = new ArrayList<>();
    try {
      jobs.add(lockedJob(p + "m1", p + "w1"));
      jobs.add(lockedJob(p + "m2", p + "w2"));
      jobs.add(lockedJob(p + "shared", p + "ws"));
      jobs.add(lockedJob(p + "m4", p + "w4"));
      List<CompletableFuture<Heartbeats.Heartbeat>> beats =
          inOneFlush(
              List.of(
                  () -> set(first, List.of(new InFlight(p + "r1", p + "m1"))),
                  () ->
                      set(
                          second,
                          List.of(
                              new InFlight(p + "r2", p + "m2"),
                              new InFlight(p + "r3", p + "shared"))),
                  () -> set(later, List.of(new InFlight(p + "r3", p + "shared"))),
                  () -> set(expired, List.of(new InFlight(p + "r4", p + "m4"))),
                  () -> set(tableSource, List.of(new InFlight(p + "r5", p + "m1")))));
      for (var b : List.of(beats.get(0), beats.get(1), beats.get(2), beats.get(4))) {
        b.get(10, TimeUnit.SECONDS);
      }
      assertThrows(ExecutionException.class, () -> beats.get(3).get(10, TimeUnit.SECONDS));
      assertEquals(List.of(p + "w1:" + p + "m1"), learned(first));
      assertEquals(
          List.of(p + "w2:" + p + "m2", p + "ws:" + p + "shared"),
          learned(second),
          "of two instances that show one worker, the first in the flush keeps it");
      assertEquals(List.of(), learned(later));
      assertEquals(List.of(), learned(expired), "a beat that renews nothing teaches nothing");
      assertEquals(List.of(), learned(tableSource));
      assertEquals(
          1,
          Db.number(
              "SELECT count(DISTINCT learned_at) FROM rollcall.queue_workers"
                  + " WHERE worker_id LIKE ?",
              p + "%"),
          "one statement, one transaction's now(), for the flush's whole namespace");
    } finally {
      Db.update(
          "DELETE FROM graphile_worker._private_jobs WHERE id = ANY(?::bigint[])",
          "{" + String.join(",", jobs.stream().map(String::valueOf).toList()) + "}");
    }
  }

  /** A queue job of the engine's flows task keyed by {@code key} and locked by {@code worker}. */
  private static long lockedJob(String key, String worker) {
    long id =
        Db.number(
            "SELECT id FROM graphile_worker.add_job('workflow_flows', '{}'::json, job_key => ?)",
            key);
    Db.update(
        "UPDATE graphile_worker._private_jobs SET locked_by = ?, locked_at = now() WHERE id = ?",
        worker,
        id);
    return id;
  }

  private static List<String> learned(Instance i) {
    return Db.column(
        "SELECT worker_id || ':' || message_id FROM rollcall.queue_workers"
            + " WHERE instance_id = ? ORDER BY worker_id",
        i.id());
  }

  private void setBeat(Instance i, List<InFlight> inFlight) throws Exception {
    set(i, inFlight).get(10, TimeUnit.SECONDS);
  }

  private CompletableFuture<Heartbeats.Heartbeat> set(Instance i, List<InFlight> inFlight) {
    return heartbeat(i, Optional.of(inFlight), Optional.empty());
  }

  private CompletableFuture<Heartbeats.Heartbeat> report(
      Instance i, SessionLiveness.Report state, Integer pid) {
    return heartbeat(
        i, Optional.empty(), Optional.of(new SessionLiveness.SessionReport(state, pid, false)));
  }

  /** A heartbeat of {@code i}, straight to the replica's flushes (its token is known). */
  private CompletableFuture<Heartbeats.Heartbeat> heartbeat(
      Instance i,
      Optional<List<InFlight>> inFlight,
      Optional<SessionLiveness.SessionReport> session) {
    return instances
        .heartbeat(
            new Caller(i.id(), i.namespace(), i.deploymentId()), inFlight, session, List.of())
        .subscribeAsCompletionStage();
  }

  /**
   * Sends {@code beats}, in order, while four other beats keep every flush of the replica busy
   * ({@link #holdEveryFlush}), so that all of them wait and then go in one flush. Returns their
   * answers once that flush is done, a failed beat's included.
   */
  private List<CompletableFuture<Heartbeats.Heartbeat>> inOneFlush(
      List<Supplier<CompletableFuture<Heartbeats.Heartbeat>>> beats) throws Exception {
    List<Instance> holders = new ArrayList<>();
    for (int k = 0; k < 4; k++) {
      holders.add(api.register(SourceTables.SMALL, UUID.randomUUID().toString(), "holder-" + k));
    }
    ExecutorService senders = Executors.newFixedThreadPool(4);
    try (Connection lock = Db.database().connect()) {
      long flushesBefore = flushes().count();
      List<CompletableFuture<Api.Reply>> held = holdEveryFlush(lock, holders, senders);
      List<CompletableFuture<Heartbeats.Heartbeat>> sent = new ArrayList<>();
      for (var b : beats) {
        sent.add(b.get());
      }
      Poll.until(
          beats.size() + " beats wait for a flush",
          Duration.ofSeconds(10),
          () -> instances.heartbeatsWaiting() == beats.size());
      lock.rollback();
      for (CompletableFuture<Api.Reply> h : held) {
        h.get(10, TimeUnit.SECONDS).expect(200);
      }
      for (var b : sent) {
        b.handle((beat, failure) -> null).get(10, TimeUnit.SECONDS);
      }
      assertEquals(
          5,
          flushes().count() - flushesBefore,
          "four held flushes, then one for the " + beats.size());
      return sent;
    } finally {
      senders.shutdownNow();
    }
  }

  private static List<String> runs(Instance i) {
    return Db.column(
        "SELECT run_id FROM rollcall.ownership WHERE instance_id = ? ORDER BY run_id", i.id());
  }

  private static List<String> messages(Instance i) {
    return Db.column(
        "SELECT message_id FROM rollcall.ownership_messages WHERE instance_id = ?"
            + " ORDER BY message_id",
        i.id());
  }

  private static String reportedAt(Instance i, String messageId) {
    return Db.column(
            "SELECT reported_at::text FROM rollcall.ownership_messages"
                + " WHERE instance_id = ? AND message_id = ?",
            i.id(),
            messageId)
        .get(0);
  }

  private static String sessionLock(Instance i) {
    return Db.column("SELECT session_lock FROM rollcall.instances WHERE id = ?", i.id()).get(0);
  }

  private static int backendPid(Connection c) throws java.sql.SQLException {
    try (var st = c.createStatement();
        var rs = st.executeQuery("SELECT pg_backend_pid()")) {
      rs.next();
      return rs.getInt(1);
    }
  }

  /** Runs {@code function} (take or release) on instance {@code i}'s session lock in {@code c}. */
  private static void lockFor(Connection c, String function, Instance i)
      throws java.sql.SQLException {
    try (PreparedStatement st =
        c.prepareStatement(
            "SELECT "
                + function
                + "("
                + SessionLiveness.CLASS_ID
                + ", rollcall.session_lock_objid(?::uuid))")) {
      st.setObject(1, i.id());
      st.executeQuery().close();
    }
  }

  /**
   * A full flush (Heartbeats.MAX_BEATS_PER_FLUSH beats) is answered and renews every instance. Its
   * per-beat statements were a chain built in a loop; a flush this size overflowed the stack of the
   * event loop that subscribed to it, the flush never answered, and its slot was never freed.
   */
  @Test
  void aFullFlushIsAnsweredAndRenewsEveryInstance() throws Exception {
    int many = Heartbeats.MAX_BEATS_PER_FLUSH;
    List<Instance> holders = new ArrayList<>();
    for (int k = 0; k < 4; k++) {
      holders.add(api.register(SourceTables.SMALL, UUID.randomUUID().toString(), "holder-" + k));
    }
    String deploy = "full-flush-" + UUID.randomUUID();
    List<UUID> ids =
        Db.column(
                "INSERT INTO rollcall.instances (id, namespace, deployment_id, name, token_hash,"
                    + " lease_expires_at) SELECT gen_random_uuid(), ?, ?, 'beat-' || g,"
                    + " sha256(gen_random_uuid()::text::bytea), now() + interval '20 seconds'"
                    + " FROM generate_series(1, ?) g RETURNING id",
                SourceTables.SMALL,
                deploy,
                many)
            .stream()
            .map(UUID::fromString)
            .toList();
    long flushesBefore = flushes().count();
    ExecutorService senders = Executors.newFixedThreadPool(4);
    List<CompletableFuture<Heartbeats.Heartbeat>> beats = new ArrayList<>();
    try (Connection lock = Db.database().connect()) {
      // The four holders' beats keep every flush waiting for their rows, so that all the others
      // wait for the next flush, which takes them all.
      List<CompletableFuture<Api.Reply>> held = holdEveryFlush(lock, holders, senders);
      for (UUID id : ids) {
        beats.add(
            instances
                .heartbeat(
                    new Caller(id, SourceTables.SMALL, deploy),
                    java.util.Optional.empty(),
                    java.util.Optional.empty(),
                    List.of())
                .subscribeAsCompletionStage());
      }
      assertEquals(many, instances.heartbeatsWaiting());
      lock.rollback();
      for (CompletableFuture<Api.Reply> h : held) {
        h.get(10, TimeUnit.SECONDS).expect(200);
      }
    } finally {
      senders.shutdownNow();
    }

    for (CompletableFuture<Heartbeats.Heartbeat> b : beats) {
      b.get(30, TimeUnit.SECONDS);
    }
    assertEquals(
        many,
        Db.number(
            "SELECT count(*) FROM rollcall.instances WHERE deployment_id = ?"
                + " AND last_heartbeat_at > registered_at",
            deploy),
        "every instance renewed");
    HistogramSnapshot after = flushes();
    assertEquals(5, after.count() - flushesBefore, "four held flushes, then one for the rest");
    assertEquals(many, after.max(), "the waiting beats went together");
    // Those instances must not outlive the test as a live fleet.
    Db.update(
        "UPDATE rollcall.instances SET state = 'left', ended_at = now() WHERE deployment_id = ?",
        deploy);
  }

  @Test
  void aHeartbeatChosenAsADeadlockVictimIsRetried() throws Exception {
    Instance i = api.register(SourceTables.SMALL, UUID.randomUUID().toString(), "victim");
    String run = Db.activeRuns(SourceTables.SMALL).iterator().next();
    api.heartbeat(i, List.of(run)).expect(200);
    long deadlocksBefore = deadlocks();
    CompletableFuture<Api.Reply> beat;
    try (Connection other = Db.database().connect()) {
      // Another transaction (as a second service replica's flush would) holds the instance's
      // ownership row and then wants the instance row that the beat's flush has locked first.
      other.setAutoCommit(false);
      try (PreparedStatement st =
          other.prepareStatement(
              "SELECT 1 FROM rollcall.ownership WHERE instance_id = ? FOR UPDATE")) {
        st.setObject(1, i.id());
        st.executeQuery().close();
      }
      beat = CompletableFuture.supplyAsync(() -> api.heartbeat(i, List.of()));
      Poll.until(
          "the flush waits for the ownership row, holding the instance row",
          Duration.ofSeconds(10),
          () ->
              Db.number(
                      "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                          + " AND query LIKE ?",
                      Ownership.REPLACE.substring(0, 30) + "%")
                  == 1);
      // Waits for the flush; the flush, waiting longer, finds the deadlock and is aborted.
      try (PreparedStatement st =
          other.prepareStatement(
              "UPDATE rollcall.instances SET last_heartbeat_at = last_heartbeat_at WHERE id = ?")) {
        st.setObject(1, i.id());
        st.executeUpdate();
      }
      other.commit();
    }
    beat.get(20, TimeUnit.SECONDS).expect(200);
    // Statistics reach pg_stat_database a little after the fact.
    Poll.until(
        "PostgreSQL counts the deadlock the flush was a victim of",
        Duration.ofSeconds(10),
        () -> deadlocks() > deadlocksBefore);
    assertEquals(
        List.of(),
        Db.column("SELECT run_id FROM rollcall.ownership WHERE instance_id = ?", i.id()),
        "the retried flush recorded the beat's in-flight set");
  }

  private static long deadlocks() {
    return Db.number("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()");
  }
}
