package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
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
import jakarta.inject.Inject;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Test;

/**
 * What a months-long installation needs from epochs: no pass stays open because its deploy went
 * away, deploys side by side keep their own passes, an operator can close any pass, and a retried
 * takeover run still names its dead owner.
 */
@ServiceTest
class LongLivedTest extends ApiTestBase {

  @Inject StrandedEpochs stranded;
  @Inject Sweeper sweeper;
  @Inject Reaper reaper;

  static final String NS = SourceTables.SMALL;

  static String state(long epochId) {
    return Db.column(
            "SELECT state || ':' || coalesce(close_reason, '') FROM rollcall.epochs WHERE id = ?",
            epochId)
        .get(0);
  }

  @Test
  void aNewBootClosesOnlyThePassesOfOlderDeploysNotOfOnesBesideIt() {
    Instance blue = api.register(NS, "blue-" + UUID.randomUUID(), "blue-1");
    Instance green = api.register(NS, "green-" + UUID.randomUUID(), "green-1");
    // Green (the newer deploy) opens its pass first; blue's first claim comes later.
    long greenEpoch = api.claimBatch(green, 1).epochId();
    long blueEpoch = api.claimBatch(blue, 1).epochId();

    assertEquals("open:", state(greenEpoch), "a side-by-side older deploy closed a newer pass");
    assertEquals("open:", state(blueEpoch));
    assertEquals(
        List.of(),
        stranded.runOnce().await().indefinitely(),
        "the periodic check closed a pass beside another (it closes superseded ones too)");

    Instance next = api.register(NS, "next-" + UUID.randomUUID(), "next-1");
    long nextEpoch = api.claimBatch(next, 1).epochId();
    // The creator's claim does not wait for the close it starts.
    Poll.until(
        "the next deploy's pass closes both older ones",
        Duration.ofSeconds(10),
        () ->
            state(greenEpoch).equals("closed:superseded")
                && state(blueEpoch).equals("closed:superseded"));
    assertEquals("open:", state(nextEpoch));
    api.post("admin/epochs/" + nextEpoch + "/close", RollcallTestResource.ADMIN_TOKEN, null);
  }

  @Test
  void aBootPassWhoseDeployHasHadNoLiveInstanceForTheGraceIsClosedAsStranded() {
    // Registered oldest first and claiming newest first, so that no pass supersedes another.
    Instance alive = api.register(NS, "alive-" + UUID.randomUUID(), "alive-1");
    Instance gone = api.register(NS, "gone-" + UUID.randomUUID(), "gone-1");
    Instance recent = api.register(NS, "recent-" + UUID.randomUUID(), "recent-1");
    long recentEpoch = api.claimBatch(recent, 1).epochId();
    Batch held = api.claimBatch(gone, 1);
    long aliveEpoch = api.claimBatch(alive, 1).epochId();
    TimeTravel.leaseExpired(recent, Duration.ofMinutes(1));
    TimeTravel.leaseExpired(gone, Duration.ofMinutes(6));

    List<Long> closed = stranded.runOnce().await().indefinitely();

    assertTrue(closed.contains(held.epochId()), closed::toString);
    assertEquals("closed:stranded", state(held.epochId()));
    assertEquals(
        "abandoned",
        Db.column("SELECT state FROM rollcall.batches WHERE id = ?", held.id()).get(0));
    // Gone for less than the grace (5 min by default), or still live: left open.
    assertEquals("open:", state(recentEpoch));
    assertEquals("open:", state(aliveEpoch));
    Db.update(
        "UPDATE rollcall.epochs SET state = 'closed', close_reason = 'test' WHERE id IN (?, ?)",
        recentEpoch,
        aliveEpoch);
  }

  @Test
  void aStrandedBootPassNeverBlocksASweepForLongerThanTheGrace() {
    // A deploy that is live and recovered, then a newer one that died mid-recovery (the rollout
    // was aborted and rolled back: the live instances keep the older deployment id).
    Instance live = api.register(NS, "live-" + UUID.randomUUID(), "live-1");
    api.drain(live, 5000);
    Instance aborted = api.register(NS, "aborted-" + UUID.randomUUID(), "aborted-1");
    long abortedEpoch = api.claimBatch(aborted, 1).epochId();
    TimeTravel.leaseExpired(aborted, Duration.ofMinutes(6));
    TimeTravel.namespaceRegisteredEarlier(NS, Duration.ofHours(1));
    TimeTravel.sweepsClosedADayAgo();

    List<Epoch> opened = sweeper.runOnce().await().indefinitely();

    assertEquals("closed:stranded", state(abortedEpoch));
    assertTrue(
        opened.stream().anyMatch(e -> e.namespace().equals(NS) && e.kind() == EpochKind.SWEEP),
        () -> "no sweep opened: " + opened);
  }

  @Test
  void anOperatorClosesAnyOpenEpochAndItsHolderMayStillComplete() {
    Instance a = api.register(NS, "op-" + UUID.randomUUID(), "op-1");
    Batch held = api.claimBatch(a, 2);

    Api.Reply r =
        api.post(
                "admin/epochs/" + held.epochId() + "/close", RollcallTestResource.ADMIN_TOKEN, null)
            .expect(200);

    assertEquals("closed", r.text("state"));
    assertEquals("closed-by-operator", r.text("closeReason"));
    assertEquals("closed:closed-by-operator", state(held.epochId()));
    assertEquals("done", api.claim(a, 10).expect(200).text("status"));
    assertEquals(200, api.complete(a, held, List.of()).status());
    api.post("admin/epochs/" + held.epochId() + "/close", RollcallTestResource.ADMIN_TOKEN, null)
        .expect(409);
    api.post("admin/epochs/999999999/close", RollcallTestResource.ADMIN_TOKEN, null).expect(404);
    api.post("admin/epochs/" + held.epochId() + "/close", "wrong", null).expect(403);
  }

  @Test
  void aRetriedTakeoverRunStillNamesItsDeadOwner() {
    Instance peer = api.register(NS, "peer-" + UUID.randomUUID(), "peer");
    Instance victim = api.register(NS, "victim-" + UUID.randomUUID(), "victim");
    List<String> inFlight = Db.activeRuns(NS).stream().sorted().limit(2).toList();
    api.heartbeat(victim, inFlight).expect(200);
    TimeTravel.leaseExpired(victim);
    reaper.runOnce().await().indefinitely();
    long takeover =
        Db.number(
            "SELECT id FROM rollcall.epochs WHERE kind = 'takeover' AND subject_instance_id = ?",
            victim.id());

    Batch first = claimFrom(peer, takeover);
    String failed = first.runIds().get(0);
    assertEquals(
        1, api.complete(peer, first, List.of(failed)).expect(200).body().get("retried").asInt());
    Batch retry = claimFrom(peer, takeover);

    assertEquals(List.of(failed), retry.runIds());
    JsonNode run = retry.json().get("runs").get(0);
    assertEquals("owner-dead", run.get("reason").asText());
    assertNotNull(run.get("deadInstanceId"), retry.json().toString());
    assertEquals(victim.id().toString(), run.get("deadInstanceId").asText());
    api.complete(peer, retry, List.of()).expect(200);
  }

  /** Claims until a batch of the given epoch comes; batches of other epochs are completed. */
  Batch claimFrom(Instance instance, long epochId) {
    for (int i = 0; i < 200; i++) {
      Batch b = api.claimBatch(instance, 100);
      assertNotNull(b, "epoch " + epochId + " never served");
      if (b.epochId() == epochId) {
        return b;
      }
      api.complete(instance, b, List.of()).expect(200);
    }
    throw new AssertionError("epoch " + epochId + " never served");
  }
}
