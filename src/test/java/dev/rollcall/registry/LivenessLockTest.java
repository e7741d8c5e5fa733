package dev.rollcall.registry;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import dev.rollcall.recovery.OperatorActions;
import dev.rollcall.recovery.Reaper;
import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import dev.rollcall.testing.TimeTravel;
import jakarta.inject.Inject;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.time.Duration;
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
        conn.prepareStatement(InstanceService.LIVE_CHECK.replace("$1", "?"))) {
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
   * Starts ending {@code i} (its death or eviction) while a claim of it holds its liveness check:
   * the end must wait for the claim, and go through once the claim commits.
   */
  private static void endWaitsForTheClaimInProgress(Instance i, Supplier<CompletableFuture<?>> end)
      throws Exception {
    CompletableFuture<?> ending;
    try (Connection claim = holdLiveCheck(i)) {
      ending = end.get();
      Thread.sleep(1000);
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
