package dev.rollcall.registry;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import dev.rollcall.recovery.OperatorActions;
import dev.rollcall.recovery.Reaper;
import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.Poll;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import dev.rollcall.testing.TimeTravel;
import jakarta.inject.Inject;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * The liveness check a claim or completion holds for its whole transaction: it must not make the
 * instance's heartbeats wait, and it must make declaring the instance dead wait.
 */
@ServiceTest
class LivenessLockTest extends ApiTestBase {

  @Inject Reaper reaper;
  @Inject OperatorActions operators;

  /** Holds the claim's liveness check on the instance, in an open transaction. */
  private static Connection holdLiveCheck(Instance instance) throws Exception {
    Connection conn = Db.database().connect();
    conn.setAutoCommit(false);
    try (PreparedStatement st =
        conn.prepareStatement(InstanceGuards.LIVE_CHECK.replace("$1", "?"))) {
      st.setObject(1, instance.id());
      st.executeQuery().close();
    }
    return conn;
  }

  @Test
  void aHeartbeatDoesNotWaitForItsInstancesClaim() throws Exception {
    Instance i = api.register(SourceTables.SMALL, UUID.randomUUID().toString(), "busy");
    try (Connection claim = holdLiveCheck(i)) {
      Api.Reply beat =
          CompletableFuture.supplyAsync(() -> api.heartbeat(i)).get(10, TimeUnit.SECONDS);
      assertEquals(200, beat.status());
      claim.rollback();
    }
  }

  @Test
  void anInstanceIsNotDeclaredDeadHalfWayThroughItsClaim() throws Exception {
    Instance i = api.register(SourceTables.SMALL, UUID.randomUUID().toString(), "dying");
    endWaitsForTheClaimInProgress(
        i,
        () -> {
          TimeTravel.leaseExpired(i, Duration.ofMillis(1));
          return reaper.runOnce().subscribeAsCompletionStage();
        });
  }

  @Test
  void anInstanceIsNotEvictedHalfWayThroughItsClaim() throws Exception {
    Instance i = api.register(SourceTables.SMALL, UUID.randomUUID().toString(), "evicted");
    endWaitsForTheClaimInProgress(i, () -> operators.evict(i.id()).subscribeAsCompletionStage());
  }

  /**
   * A heartbeat, a leave and an exiting leave that wait behind their instance's death (the death's
   * transaction holds the row) are refused once the death commits, and renew nothing: the liveness
   * of these by-id statements ({@link Liveness}) is part of the statement that acts on the row, so
   * PostgreSQL checks it again on the row the death left.
   */
  @Test
  void actsThatWaitBehindTheirInstancesDeathAreRefusedOnceItCommits() throws Exception {
    for (String act : java.util.List.of("heartbeat", "leave", "exiting leave")) {
      Instance i = api.register(SourceTables.SMALL, UUID.randomUUID().toString(), act);
      String leaseBefore =
          Db.column("SELECT lease_expires_at::text FROM rollcall.instances WHERE id = ?", i.id())
              .get(0);
      CompletableFuture<Api.Reply> reply;
      try (Connection death = Db.database().connect()) {
        death.setAutoCommit(false);
        try (PreparedStatement st =
            death.prepareStatement(
                "UPDATE rollcall.instances SET state = 'dead', ended_at = now(),"
                    + " end_reason = 'lease-expired' WHERE id = ?")) {
          st.setObject(1, i.id());
          assertEquals(1, st.executeUpdate());
        }
        reply =
            CompletableFuture.supplyAsync(
                () ->
                    switch (act) {
                      case "heartbeat" -> api.heartbeat(i);
                      case "leave" -> api.leave(i);
                      default -> api.exitingLeave(i, java.util.List.of());
                    });
        // The act's statement on the instance's row waits for the death's row lock.
        Db.awaitWaitingBehind(death, "rollcall.instances");
        assertFalse(reply.isDone(), act + " did not wait for the death: " + reply);
        death.commit();
      }
      assertEquals(410, reply.get(10, TimeUnit.SECONDS).status(), act);
      assertEquals(
          java.util.List.of("dead", leaseBefore),
          Db.column(
              "SELECT unnest(ARRAY[state, lease_expires_at::text]) FROM rollcall.instances"
                  + " WHERE id = ?",
              i.id()),
          act + " changed nothing");
    }
  }

  /**
   * A death that waits for its instance's claim in progress holds up no other death of the pass:
   * the reaper declares a few at once, each in its own transaction. One at a time, every lease that
   * expired after the waiting one stayed live until that claim committed.
   */
  @Test
  void aDeathWaitingForItsClaimHoldsUpNoOtherDeath() throws Exception {
    String deploy = UUID.randomUUID().toString();
    Instance busy = api.register(SourceTables.SMALL, deploy, "busy");
    List<Instance> others = new ArrayList<>();
    for (int n = 0; n < 6; n++) {
      others.add(api.register(SourceTables.SMALL, deploy, "other-" + n));
    }
    // The busy instance's lease expired first, so the pass takes it first.
    TimeTravel.leaseExpired(busy, Duration.ofSeconds(5));
    others.forEach(o -> TimeTravel.leaseExpired(o, Duration.ofSeconds(1)));
    CompletableFuture<Reaper.Pass> pass;
    try (Connection claim = holdLiveCheck(busy)) {
      pass = reaper.runOnce().subscribeAsCompletionStage();
      Poll.until(
          "the other instances declared dead while the busy one's death waits",
          Duration.ofSeconds(20),
          () ->
              others.stream()
                  .allMatch(
                      o ->
                          "dead"
                              .equals(
                                  Db.column(
                                          "SELECT state FROM rollcall.instances WHERE id = ?",
                                          o.id())
                                      .get(0))));
      assertFalse(pass.isDone(), "the pass still waits for the busy instance's death");
      assertEquals(
          "live", Db.column("SELECT state FROM rollcall.instances WHERE id = ?", busy.id()).get(0));
      claim.commit();
    }
    assertEquals(new Reaper.Pass(7, 0, 0), pass.get(30, TimeUnit.SECONDS));
    assertEquals(
        "dead", Db.column("SELECT state FROM rollcall.instances WHERE id = ?", busy.id()).get(0));
  }

  /**
   * Starts ending {@code i} (its death or eviction) while a claim of it holds its liveness check:
   * the end must wait for the claim, and go through once the claim commits.
   */
  private static void endWaitsForTheClaimInProgress(Instance i, Supplier<CompletableFuture<?>> end)
      throws Exception {
    CompletableFuture<?> ending;
    try (Connection claim = holdLiveCheck(i)) {
      ending = end.get();
      // The end lock (FOR UPDATE) waits for the claim's liveness check (FOR KEY SHARE).
      Db.awaitWaitingBehind(claim, "FOR UPDATE");
      assertFalse(ending.isDone(), "the end waits for the claim in progress");
      assertEquals(
          "live", Db.column("SELECT state FROM rollcall.instances WHERE id = ?", i.id()).get(0));
      claim.commit();
    }
    ending.get(30, TimeUnit.SECONDS);
    assertEquals(
        "dead", Db.column("SELECT state FROM rollcall.instances WHERE id = ?", i.id()).get(0));
  }
}
