package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.Poll;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import dev.rollcall.testing.TimeTravel;
import io.micrometer.core.instrument.MeterRegistry;
import jakarta.inject.Inject;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A held claim that ends without answering (its caller hung up) leaves the waiting room with it: a
 * replica killed while its idle claim was held must not leave a waiter behind that takes the next
 * notice, the takeover of that very replica, from the live peer that could serve it.
 */
@ServiceTest
class HeldClaimEndsTest extends ApiTestBase {

  @Inject Wakeups wakeups;
  @Inject Reaper reaper;
  @Inject MeterRegistry meters;

  private final String ns = SourceTables.SMALL;
  private String deploy;
  private int before;
  private Instance peer;
  private List<String> inFlight;

  /** A fresh deploy whose pass a live peer has finished, and the runs another will hold. */
  @BeforeEach
  void peerDone() {
    deploy = UUID.randomUUID().toString();
    before = wakeups.waiting(ns);
    peer = api.register(ns, deploy, "peer");
    api.drain(peer, 100);
    inFlight = Db.activeRuns(ns).stream().sorted().limit(3).toList();
  }

  @Test
  void aHeldClaimWhoseCallerHungUpDoesNotTakeTheNextWakeFromALivePeer() throws Exception {
    Instance gone = api.register(ns, deploy, "gone");
    Instance leaver = api.register(ns, deploy, "leaver");
    api.heartbeat(leaver, inFlight).expect(200);

    // The gone replica's idle claim is held; then its process dies and the connection closes.
    try (Socket socket = new Socket(base.getHost(), base.getPort())) {
      String body = "{\"maxRuns\":100,\"waitMs\":20000,\"idle\":true}";
      OutputStream out = socket.getOutputStream();
      out.write(
          ("POST " + base.resolve("recovery/claim").getRawPath() + " HTTP/1.1\r\n")
              .concat("Host: " + base.getHost() + ":" + base.getPort() + "\r\n")
              .concat("Authorization: Bearer " + gone.token() + "\r\n")
              .concat("Content-Type: application/json\r\n")
              .concat("Content-Length: " + body.length() + "\r\n\r\n")
              .concat(body)
              .getBytes(StandardCharsets.US_ASCII));
      out.flush();
      Poll.until(
          "the gone replica's claim is held",
          Duration.ofSeconds(5),
          () -> wakeups.waiting(ns) == before + 1);
      assertEquals(before + 1, held(ns), "rollcall_claims_held counts it");
    }
    Poll.until(
        "the hung-up claim leaves the waiting room",
        Duration.ofSeconds(5),
        () -> wakeups.waiting(ns) == before);
    assertEquals(before, held(ns), "rollcall_claims_held no longer counts it");

    // The live peer's idle claim is held next; then the leaver leaves with runs in flight.
    CompletableFuture<Api.Reply> held =
        CompletableFuture.supplyAsync(() -> api.claimHeld(peer, 100, 20_000, true));
    Poll.until(
        "the peer's claim is held", Duration.ofSeconds(5), () -> wakeups.waiting(ns) == before + 1);
    assertFalse(held.isDone());
    long t0 = System.nanoTime();
    api.leave(leaver, inFlight).expect(204);

    assertPeerTookOverAtOnce(held, t0);
    api.leave(gone).expect(204);
  }

  private double held(String namespace) {
    return meters.get("rollcall.claims.held").tag("namespace", namespace).gauge().value();
  }

  @Test
  void aClaimWokenForAnInstanceThatHasDiedPassesTheWakeOnToALivePeer() throws Exception {
    Instance victim = api.register(ns, deploy, "victim");
    api.heartbeat(victim, inFlight).expect(200);

    // The victim's idle claim is held first (its connection stays open), the peer's next.
    CompletableFuture<Api.Reply> victimHeld =
        CompletableFuture.supplyAsync(() -> api.claimHeld(victim, 100, 20_000, true));
    Poll.until(
        "the victim's claim is held",
        Duration.ofSeconds(5),
        () -> wakeups.waiting(ns) == before + 1);
    CompletableFuture<Api.Reply> peerHeld =
        CompletableFuture.supplyAsync(() -> api.claimHeld(peer, 100, 20_000, true));
    Poll.until(
        "the peer's claim is held", Duration.ofSeconds(5), () -> wakeups.waiting(ns) == before + 2);

    // The victim's lease runs out; the reaper declares it dead and opens its takeover, whose
    // notice wakes the oldest waiting claim: the victim's own, which is refused (410).
    TimeTravel.leaseExpired(victim);
    long t0 = System.nanoTime();
    reaper.runOnce().await().indefinitely();

    assertEquals(410, victimHeld.get(5, TimeUnit.SECONDS).status());
    assertPeerTookOverAtOnce(peerHeld, t0);
  }

  /**
   * The peer's held claim answered with the takeover of the runs in flight, well within its hold: a
   * notice woke it. No held claim of the test is left waiting.
   */
  private void assertPeerTookOverAtOnce(CompletableFuture<Api.Reply> held, long t0)
      throws Exception {
    Api.Reply takeover = held.get(5, TimeUnit.SECONDS).expect(200);
    long ms = (System.nanoTime() - t0) / 1_000_000;
    assertEquals("batch", takeover.text("status"));
    assertEquals("takeover", takeover.body().get("batch").get("epochKind").asText());
    assertEquals(
        Set.copyOf(inFlight), Set.copyOf(Api.batch(takeover.body().get("batch")).runIds()));
    assertTrue(ms < 2000, "the peer's claim was woken: " + ms + " ms");
    assertEquals(before, wakeups.waiting(ns));
  }
}
