package dev.rollcall.registry;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.rollcall.recovery.Reaper;
import dev.rollcall.recovery.SessionReaper;
import dev.rollcall.registry.SessionLiveness.Rules;
import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.Poll;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import io.micrometer.core.instrument.MeterRegistry;
import jakarta.inject.Inject;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.postgresql.PGConnection;

/**
 * The session-lock fast path against a real PostgreSQL: a JDBC connection stands for the client's
 * dedicated session. Each guard has a test that fails without it.
 */
@ServiceTest
class SessionLivenessTest extends ApiTestBase {

  /**
   * Graces passed (registration is back-dated), one check a confirm after another. The confirm's
   * time passes by moving sightings into the past ({@link #aConfirmPassed}), so a long one costs
   * nothing, and keeps a check's own time on a loaded machine far below the age at which a sighting
   * is stale (three confirms) and seen anew.
   */
  static final Rules FAST = new Rules(Duration.ofSeconds(5), Duration.ZERO, Duration.ofSeconds(2));

  @Inject SessionReaper sessions;
  @Inject MeterRegistry meters;

  final List<Connection> opened = new ArrayList<>();

  @AfterEach
  void closeSessions() throws SQLException {
    for (Connection c : opened) {
      c.close();
    }
    // Each test judges its own instances only: leave the ones it armed.
    Db.update(
        "UPDATE rollcall.instances SET state = 'left', end_reason = 'left'"
            + " WHERE state = 'live' AND session_lock <> 'none'");
  }

  /** A registered instance, its lock keys, and a session holding its lock. */
  record Held(Instance instance, int classId, int objId, Connection session, int pid) {}

  Held registerAndHold(String name) throws SQLException {
    ObjectNode body =
        Api.JSON
            .createObjectNode()
            .put("namespace", SourceTables.SMALL)
            .put("deploymentId", "session-" + UUID.randomUUID())
            .put("name", name);
    Api.Reply r = api.post("instances", SourceTables.secret(SourceTables.SMALL), body).expect(201);
    Instance instance =
        new Instance(
            UUID.fromString(r.text("instanceId")),
            r.text("token"),
            SourceTables.SMALL,
            body.get("deploymentId").asText());
    int classId = r.body().path("sessionLock").path("classId").asInt();
    int objId = r.body().path("sessionLock").path("objId").asInt();
    Connection session = Db.database().connect();
    opened.add(session);
    int pid = lock(session, classId, objId);
    return new Held(instance, classId, objId, session, pid);
  }

  /** Takes the lock in {@code session}; returns its backend pid, or -1 when someone holds it. */
  static int lock(Connection session, int classId, int objId) throws SQLException {
    try (Statement st = session.createStatement();
        ResultSet rs =
            st.executeQuery(
                "SELECT pg_try_advisory_lock("
                    + classId
                    + ", "
                    + objId
                    + ") AS taken, pg_backend_pid() AS pid")) {
      rs.next();
      return rs.getBoolean("taken") ? rs.getInt("pid") : -1;
    }
  }

  Api.Reply report(Instance instance, String state, Integer pid, boolean reconnected) {
    ObjectNode body = Api.JSON.createObjectNode();
    ObjectNode lock = body.putObject("sessionLock").put("state", state);
    if (pid != null) {
      lock.put("pid", pid);
    }
    lock.put("reconnected", reconnected);
    return api.post("instances/" + instance.id() + "/heartbeat", instance.token(), body);
  }

  static void pastGraces(Instance instance) {
    Db.update(
        "UPDATE rollcall.instances SET registered_at = now() - interval '1 minute',"
            + " session_since = now() - interval '1 minute' WHERE id = ?",
        instance.id());
  }

  static String column(Instance instance, String column) {
    return Db.column("SELECT " + column + " FROM rollcall.instances WHERE id = ?", instance.id())
        .get(0);
  }

  /**
   * Waits until the backend of every closed test session has exited: a closed JDBC connection's
   * backend releases its locks a moment after the close returns.
   */
  void awaitEnded() throws InterruptedException {
    List<String> open = new ArrayList<>();
    for (Connection c : opened) {
      try {
        if (!c.isClosed()) {
          open.add(String.valueOf(c.unwrap(PGConnection.class).getBackendPID()));
        }
      } catch (SQLException closedMeanwhile) {
        // not open
      }
    }
    Poll.until(
        "the backends of closed test sessions let go of their locks",
        Duration.ofSeconds(5),
        () ->
            Db.number(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2"
                        + " AND classid = "
                        + SessionLiveness.CLASS_ID
                        + "::oid AND NOT (pid::text = ANY (?::text[]))",
                    (Object) open.toArray(String[]::new))
                == 0);
  }

  Reaper.Pass check(Rules rules) throws InterruptedException {
    awaitEnded();
    return sessions.runOnce(rules).await().indefinitely();
  }

  /** Two checks a confirm apart: what it takes to condemn a lost session. */
  Reaper.Pass twoChecks(Rules rules) throws InterruptedException {
    check(rules);
    aConfirmPassed(rules);
    return check(rules);
  }

  /**
   * A loss confirmation's time passes for every sighting of a lost lock, by the database's clock:
   * the sightings move that far into the past (and a little more), as they would by waiting.
   */
  static void aConfirmPassed(Rules rules) {
    Db.update(
        "UPDATE rollcall.instances SET session_missing_since = session_missing_since"
            + " - ?::bigint * interval '1 millisecond' WHERE session_missing_since IS NOT NULL",
        rules.lossConfirm().toMillis() + 50);
  }

  Held armed(String name) throws SQLException {
    Held h = registerAndHold(name);
    report(h.instance(), "held", h.pid(), false).expect(200);
    pastGraces(h.instance());
    assertEquals("held", column(h.instance(), "session_lock"));
    return h;
  }

  @Inject SessionLiveness liveness;
  @Inject io.vertx.mutiny.sqlclient.Pool pool;

  @Test
  void aLockRecordedHeldWakesTheChecksWhichFindItArmed() throws Exception {
    long before = liveness.heldRecords();
    armed("wakes");
    assertTrue(liveness.heldRecords() > before, "the heartbeat's record woke the checks");
    assertTrue(liveness.check(pool, FAST, 10).await().indefinitely().armed());
  }

  @Test
  void anInstanceWhoseSessionEndedIsDeadWithProofSessionLostAndItsTakeoverOpens() throws Exception {
    Held h = armed("crashes");
    double before = deaths("session-lost");

    h.session().close();
    twoChecks(FAST);

    assertEquals("dead", column(h.instance(), "state"));
    assertEquals("session-lost", column(h.instance(), "end_reason"));
    assertEquals(
        1,
        Db.number(
            "SELECT count(*) FROM rollcall.epochs WHERE kind = 'takeover'"
                + " AND subject_instance_id = ?",
            h.instance().id()));
    assertEquals(before + 1, deaths("session-lost"));
    // Its lease had not run out: only the session proved the death.
    assertTrue(
        Db.number(
                "SELECT count(*) FROM rollcall.instances WHERE id = ? AND lease_expires_at > now()",
                h.instance().id())
            == 1);
    api.heartbeat(h.instance()).expect(410);
  }

  @Test
  void aSessionDeathWaitsForTheInstancesClaimInProgress() throws Exception {
    Held h = armed("dies-mid-claim");
    CompletableFuture<Reaper.Pass> second;
    try (Connection claim = Db.database().connect()) {
      // A claim's liveness check, held open: the death must not commit half-way through it.
      claim.setAutoCommit(false);
      try (PreparedStatement st =
          claim.prepareStatement(InstanceGuards.LIVE_CHECK.replace("$1", "?"))) {
        st.setObject(1, h.instance().id());
        st.executeQuery().close();
      }
      h.session().close();
      check(FAST);
      aConfirmPassed(FAST);
      awaitEnded();
      second = sessions.runOnce(FAST).subscribeAsCompletionStage();
      // The end lock (FOR UPDATE) waits for the claim's liveness check (FOR KEY SHARE).
      Db.awaitWaitingBehind(claim, "FOR UPDATE");
      assertFalse(second.isDone(), "the death waits for the claim in progress");
      assertEquals("live", column(h.instance(), "state"));
      claim.commit();
    }
    second.get(30, TimeUnit.SECONDS);
    assertEquals("dead", column(h.instance(), "state"));
    assertEquals("session-lost", column(h.instance(), "end_reason"));
  }

  @Test
  void aHeldLockKeepsItsInstanceLive() throws Exception {
    Held h = armed("lives");
    twoChecks(FAST);
    assertEquals("live", column(h.instance(), "state"));
  }

  /**
   * Reading {@code pg_locks} copies the fleet's whole lock table, so an armed instance's beat does
   * not: only the checks watch its lock. The lock here goes while its session lives (released on
   * that backend, as a proxy's session reset would), which a beat that looked would see at once.
   */
  @Test
  void anArmedInstancesBeatLooksAtTheLockTableOnlyOnceACheckMissedItsLock() throws Exception {
    Held h = armed("beats-armed");
    try (Statement st = h.session().createStatement()) {
      st.execute("SELECT pg_advisory_unlock(" + h.classId() + ", " + h.objId() + ")");
    }

    report(h.instance(), "held", h.pid(), false).expect(200);
    assertEquals("held", column(h.instance(), "session_lock"), "the beat did not look");

    check(FAST);
    assertTrue(column(h.instance(), "session_missing_since") != null, "a check missed the lock");
    report(h.instance(), "held", h.pid(), false).expect(200);
    assertEquals("unseen", column(h.instance(), "session_lock"), "this beat looked");

    twoChecks(FAST);
    assertEquals("live", column(h.instance(), "state"), "a beating instance is left to its lease");
  }

  @Test
  void oneSightingIsNotEnoughALockTakenAgainBeforeTheConfirmClearsIt() throws Exception {
    Held h = armed("reconnects-quietly");
    h.session().close();
    check(FAST);
    assertTrue(column(h.instance(), "session_missing_since") != null, "seen missing once");
    // The client reconnects and takes its lock again before the loss is confirmed.
    Connection again = Db.database().connect();
    opened.add(again);
    assertTrue(lock(again, h.classId(), h.objId()) > 0);
    aConfirmPassed(FAST);

    check(FAST);
    assertEquals("live", column(h.instance(), "state"));
    assertEquals(null, column(h.instance(), "session_missing_since"));
  }

  @Test
  void noSessionDeathWithinTheGraceAfterRegistration() throws Exception {
    Held h = registerAndHold("just-registered");
    report(h.instance(), "held", h.pid(), false).expect(200);
    h.session().close();
    twoChecks(FAST);
    assertEquals("live", column(h.instance(), "state"));
  }

  @Test
  void noSessionDeathWithinTheGraceAfterAReportedReconnect() throws Exception {
    Held h = armed("flaps");
    Connection again = Db.database().connect();
    opened.add(again);
    h.session().close();
    // The closed session's backend lets go of the lock a moment after the close returns.
    awaitEnded();
    int pid = lock(again, h.classId(), h.objId());
    assertTrue(pid > 0, "the lock is taken again in the new session");
    report(h.instance(), "held", pid, true).expect(200);
    again.close();

    twoChecks(FAST);
    assertEquals("live", column(h.instance(), "state"));
  }

  @Test
  void noSessionDeathWithinTheGraceAfterTheDatabaseStarted() throws Exception {
    Held h = armed("db-restarted");
    h.session().close();
    // The database started less than an hour ago: within this grace, every session is suspect.
    Rules restarting = new Rules(FAST.sessionGrace(), Duration.ofHours(1), FAST.lossConfirm());
    twoChecks(restarting);
    assertEquals("live", column(h.instance(), "state"));
  }

  @Test
  void anOldSightingIsSeenAnewNotTakenAsConfirmation() throws Exception {
    Held h = armed("old-sighting");
    h.session().close();
    // A sighting from long ago (the service was down, or its checks failed meanwhile).
    Db.update(
        "UPDATE rollcall.instances SET session_missing_since = now() - interval '1 hour'"
            + " WHERE id = ?",
        h.instance().id());
    check(FAST);
    assertEquals("live", column(h.instance(), "state"));
    aConfirmPassed(FAST);
    check(FAST);
    assertEquals("dead", column(h.instance(), "state"), "a fresh sighting, confirmed");
  }

  @Test
  void aReportedLossOrAnUnavailableLockLeavesTheInstanceToItsLease() throws Exception {
    Held lost = armed("reports-lost");
    Held unavailable = armed("reports-unavailable");
    lost.session().close();
    unavailable.session().close();
    report(lost.instance(), "lost", null, false).expect(200);
    report(unavailable.instance(), "unavailable", null, false).expect(200);

    twoChecks(FAST);
    assertEquals("lost", column(lost.instance(), "session_lock"));
    assertEquals("unavailable", column(unavailable.instance(), "session_lock"));
    assertEquals("live", column(lost.instance(), "state"));
    assertEquals("live", column(unavailable.instance(), "state"));
  }

  @Test
  void aLockTheServiceDoesNotSeeHeldByTheReportedBackendNeverArmsTheFastPath() throws Exception {
    Held h = registerAndHold("elsewhere");
    // Reported held by a backend that does not hold it (another database, a pooler's backend).
    report(h.instance(), "held", h.pid() + 100_000, false).expect(200);
    pastGraces(h.instance());
    assertEquals("unseen", column(h.instance(), "session_lock"));
    h.session().close();

    twoChecks(FAST);
    assertEquals("live", column(h.instance(), "state"));
  }

  @Test
  void aCollidingKeyCannotBeTakenTwiceTheSecondInstanceFallsBackToItsLease() throws Exception {
    Held first = armed("first");
    // A second instance whose key collides (2^-32) tries the same lock in its own session.
    Connection second = Db.database().connect();
    opened.add(second);
    assertEquals(-1, lock(second, first.classId(), first.objId()), "the lock is exclusive");
    Held other = registerAndHold("second");
    report(other.instance(), "unavailable", null, false).expect(200);
    pastGraces(other.instance());
    other.session().close();

    first.session().close();
    twoChecks(FAST);
    assertEquals("dead", column(first.instance(), "state"));
    assertEquals("live", column(other.instance(), "state"), "the second keeps its lease");
  }

  @Test
  void twoServiceReplicasCheckingAtOnceDeclareOneDeathAndOpenOneTakeover() throws Exception {
    Held h = armed("raced");
    h.session().close();
    check(FAST);
    aConfirmPassed(FAST);

    CompletableFuture<Reaper.Pass> a =
        sessions.runOnce(FAST).subscribeAsCompletionStage().toCompletableFuture();
    CompletableFuture<Reaper.Pass> b =
        sessions.runOnce(FAST).subscribeAsCompletionStage().toCompletableFuture();
    int reaped = a.get().reaped() + b.get().reaped();

    assertEquals(1, reaped);
    assertEquals(
        1,
        Db.number(
            "SELECT count(*) FROM rollcall.epochs WHERE subject_instance_id = ?",
            h.instance().id()));
  }

  @Test
  void aHeldReportNeedsTheBackendPid() {
    Instance i = api.register(SourceTables.SMALL, "d-" + UUID.randomUUID(), "no-pid");
    report(i, "held", null, false).expect(400);
    report(i, "sort-of", 1, false).expect(400);
  }

  double deaths(String proof) {
    return meters.find("rollcall.instances.dead").tag("proof", proof).counters().stream()
        .mapToDouble(c -> c.count())
        .sum();
  }
}
