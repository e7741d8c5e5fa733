package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Batch;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.Poll;
import dev.rollcall.testing.RollcallTestResource;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import dev.rollcall.testing.TimeTravel;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import jakarta.inject.Inject;
import java.sql.Connection;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The claims of a deploy whose pass this service replica has read closed are answered "done" from
 * one read, without a claim's transactions (PassOver#answer), and only when the first look would
 * have answered the same: the instance live, no takeover, sweep or manual pass open, the pass's row
 * kept.
 */
@ServiceTest
class PassOverTest extends ApiTestBase {

  @Inject MeterRegistry meters;

  private final String ns = SourceTables.SMALL;
  private String deploy;

  @BeforeEach
  void finishedPass() {
    // No takeover, sweep or manual pass of another test is open in the namespace: each would be
    // served first.
    Poll.until(
        "no epoch every instance serves is open in " + ns,
        Duration.ofSeconds(10),
        () ->
            Db.number(
                    "SELECT count(*) FROM rollcall.epochs WHERE namespace = ? AND kind <> 'boot'"
                        + " AND state = 'open'",
                    ns)
                == 0);
    deploy = UUID.randomUUID().toString();
    // The deploy's pass, worked to its end: its last claim's first look read the pass closed.
    api.drain(api.register(ns, deploy, "first"), 5000);
  }

  private long bootEpoch() {
    return Db.number(
        "SELECT id FROM rollcall.epochs WHERE deployment_id = ? AND kind = 'boot'", deploy);
  }

  /**
   * Here the instance's row is locked as a death or a leave locks it: a claim's first look (its
   * liveness check takes a share lock on that row) would wait for it. The claim of a finished
   * deploy does not: it holds no lock and opens no transaction.
   */
  @Test
  void aClaimOfAFinishedDeployIsAnsweredWithoutAClaimTransaction() throws Exception {
    Instance late = api.register(ns, deploy, "late");
    double answered = passOver();
    try (Connection row =
        Db.holding("SELECT 1 FROM rollcall.instances WHERE id = ? FOR UPDATE", late.id())) {
      CompletableFuture<Api.Reply> answer =
          CompletableFuture.supplyAsync(() -> api.claim(late, 10));
      Api.Reply reply = answer.get(10, TimeUnit.SECONDS).expect(200);
      assertEquals("done", reply.text("status"));
      assertEquals(bootEpoch(), reply.body().path("epochId").asLong());
      row.rollback();
    }
    assertEquals(answered + 1, passOver(), "rollcall_claims_pass_over_total counts the answer");
  }

  private double passOver() {
    Counter c = meters.find("rollcall.claims.pass.over").tag("namespace", ns).counter();
    return c == null ? 0 : c.count();
  }

  @Test
  void anInstanceThatIsNoLongerLiveIsStillRefused() {
    Instance late = api.register(ns, deploy, "late");
    TimeTravel.leaseExpired(late);
    api.claim(late, 10).expect(410);
  }

  /** A takeover opened after the pass closed is handed out to the deploy's next claim. */
  @Test
  void anOpenTakeoverIsStillServed() {
    Instance stays = api.register(ns, deploy, "stays");
    Instance leaving = api.register(ns, deploy, "leaving");
    List<String> last = Db.activeRuns(ns).stream().sorted().limit(2).toList();
    api.leave(leaving, last).expect(204);

    Api.Reply reply = api.claim(stays, 100).expect(200);

    assertEquals("batch", reply.text("status"), reply.raw());
    Batch taken = Api.batch(reply.body().get("batch"));
    assertEquals("takeover", taken.json().get("epochKind").asText());
    assertEquals(Set.copyOf(last), Set.copyOf(taken.runIds()));
    api.complete(stays, taken, List.of()).expect(200);
  }

  /**
   * A pass that retention deleted is not remembered: the deploy's claims look as a first claim
   * would, and open a pass again.
   */
  @Test
  void aPassDeletedSinceIsForgotten() {
    long deleted = bootEpoch();
    Db.update(
        "DELETE FROM rollcall.batch_runs WHERE batch_id IN"
            + " (SELECT id FROM rollcall.batches WHERE epoch_id = ?)",
        deleted);
    Db.update("DELETE FROM rollcall.batches WHERE epoch_id = ?", deleted);
    Db.update("DELETE FROM rollcall.epochs WHERE id = ?", deleted);
    Instance late = api.register(ns, deploy, "late");

    Api.Reply reply = api.claim(late, 10).expect(200);

    long again = bootEpoch();
    assertNotEquals(deleted, again, "no pass was opened again: " + reply.raw());
    assertNotEquals("done", reply.text("status"), reply.raw());
  }

  /**
   * A pass switched off by an operator reads as closed without being closed: switched on again, it
   * is served, not remembered as over.
   */
  @Test
  void aPassSwitchedOffIsNotRememberedAsOver() {
    String open = UUID.randomUUID().toString();
    Instance holder = api.register(ns, open, "holder");
    Batch held = api.claimBatch(holder, 1);
    Instance peer = api.register(ns, open, "peer");
    setBootRecovery(false);
    try {
      assertEquals("done", api.claim(peer, 10).expect(200).text("status"));
    } finally {
      setBootRecovery(true);
    }
    Api.Reply on = api.claim(peer, 10).expect(200);
    assertNotEquals("done", on.text("status"), on.raw());
    api.complete(holder, held, List.of()).expect(200);
    if (on.text("status").equals("batch")) {
      api.complete(peer, Api.batch(on.body().get("batch")), List.of()).expect(200);
    }
    api.drain(peer, 5000);
  }

  private void setBootRecovery(boolean on) {
    api.send(
            "PUT",
            "admin/namespaces/" + ns + "/recovery",
            RollcallTestResource.ADMIN_TOKEN,
            "{\"bootRecovery\":" + on + "}")
        .expect(200);
  }
}
