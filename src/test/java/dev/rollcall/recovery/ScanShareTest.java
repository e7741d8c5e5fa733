package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.rollcall.config.RollcallConfig;
import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Batch;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.Poll;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import jakarta.inject.Inject;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.postgresql.PGConnection;
import org.postgresql.PGNotification;

/**
 * At most {@code rollcall.claim.max-scanners} instances work one pass's scan at once: the claims of
 * the others wait, and a "work" notice wakes them when an instance's last lease in the pass ends.
 */
@ServiceTest
class ScanShareTest extends ApiTestBase {

  private static final ObjectMapper JSON = new ObjectMapper();

  /** Runs per claim: the small namespace's 30 active runs make 15 pages. */
  private static final int PAGE = 2;

  @Inject RollcallConfig config;
  @Inject ClaimService claims;
  @Inject MeterRegistry meters;
  @Inject Wakeups wakeups;

  private String deploy;
  private int limit;

  @BeforeEach
  void newDeploy() {
    deploy = "scan-share-" + UUID.randomUUID();
    limit = config.claim().maxScanners();
    assertTrue(limit > 0 && limit < 15, "the default leaves room to show the limit: " + limit);
  }

  @Test
  void aClaimWaitsWhileTheLimitOfInstancesWorkThePass() {
    List<Instance> scanners = instances(limit);
    List<Batch> batches = eachTakesAPage(scanners);
    assertEquals(limit, distinctHolders(batches.get(0).epochId()));

    double full = scanFull();
    Instance late = api.register(SourceTables.SMALL, deploy, "late");
    Api.Reply reply = api.claim(late, PAGE).expect(200);
    assertEquals("wait", reply.text("status"), "the scan is full: " + reply);
    assertEquals(full + 1, scanFull(), "rollcall_claims_scan_full_total counts it");

    // An instance already working the scan takes its next page (a client claims ahead).
    Api.Reply again = api.claim(scanners.get(0), PAGE).expect(200);
    assertEquals("batch", again.text("status"), "a scanner's next page: " + again);
    assertEquals(limit, distinctHolders(batches.get(0).epochId()));
  }

  @Test
  void aClaimThatFindsTheScanFullAnswersWithoutTheEpochsLock() throws Exception {
    FullScan full = fullScan();
    Instance late = full.late();
    try (Connection held = Db.holdingEpochLock(full.batches().get(0).epochId())) {
      // Had the claim queued for the lock to learn the scan is full, it would not answer now.
      Api.Reply reply =
          CompletableFuture.supplyAsync(() -> api.claim(late, PAGE)).get(10, TimeUnit.SECONDS);
      assertEquals("wait", reply.expect(200).text("status"));
      assertEquals(0, Db.waitingForEpochLock(), "no session waited for the lock");
      held.rollback();
    }
  }

  @Test
  void aStalledScannersShareGoesWithItsExpiredBatchNotBesideIt() {
    List<Instance> scanners = instances(limit);
    List<Batch> batches = eachTakesAPage(scanners);
    // One scanner stalls: its lease runs out. Its batch is let again to the next claimer, who
    // takes its place in the scan rather than a page beside it.
    Batch stalled = batches.get(1);
    Db.update(
        "UPDATE rollcall.batches SET lease_expires_at = now() - interval '1 second' WHERE id = ?",
        stalled.id());
    Instance late = api.register(SourceTables.SMALL, deploy, "late");
    Api.Reply reply = api.claim(late, PAGE).expect(200);
    assertEquals("batch", reply.text("status"), "the expired batch is let again: " + reply);
    assertEquals(stalled.id(), Api.batch(reply.body().get("batch")).id());
    assertEquals(limit, distinctHolders(stalled.epochId()), "still " + limit + " at work");
    // The stalled scanner's late complete is refused by the fence; it no longer works the scan.
    api.complete(scanners.get(1), stalled, List.of()).expect(409);
    Instance another = api.register(SourceTables.SMALL, deploy, "another");
    assertEquals("wait", api.claim(another, PAGE).expect(200).text("status"));
  }

  @Test
  void anInstanceLeavingTheScanWakesAWaitingClaimAndOnlyThen() throws Exception {
    List<Instance> scanners = instances(limit);
    List<Batch> batches = eachTakesAPage(scanners);
    // The first scanner holds a second batch, as a client that claimed ahead does.
    Batch ahead = api.claimBatch(scanners.get(0), PAGE);
    Instance late = api.register(SourceTables.SMALL, deploy, "late");
    assertEquals("wait", api.claim(late, PAGE).expect(200).text("status"));

    try (Connection listener = Db.database().connect()) {
      try (Statement st = listener.createStatement()) {
        st.execute("LISTEN rollcall_recovery");
      }
      PGConnection pg = listener.unwrap(PGConnection.class);

      // Its first batch ends, its second goes on: it still works the scan, no share is free.
      api.complete(scanners.get(0), batches.get(0), List.of()).expect(200);
      assertEquals(List.of(), workNotices(pg, 1000), "no notice while it still holds a lease");
      assertEquals("wait", api.claim(late, PAGE).expect(200).text("status"));

      // Another scanner's only batch ends: its share of the scan is free, and a notice says so.
      api.complete(scanners.get(1), batches.get(1), List.of()).expect(200);
      List<JsonNode> notices = workNotices(pg, 5000);
      assertEquals(1, notices.size(), "one work notice of the deploy's pass: " + notices);
      assertEquals(ahead.epochId(), notices.get(0).path("epochId").asLong());
    }
    Api.Reply reply = api.claim(late, PAGE).expect(200);
    assertEquals("batch", reply.text("status"), "the freed share is taken: " + reply);
  }

  @Test
  void aHeldClaimIsWokenWhenAShareFrees() throws Exception {
    FullScan full = fullScan();
    List<Instance> scanners = full.scanners();
    List<Batch> batches = full.batches();
    Instance late = full.late();
    int before = wakeups.waiting(SourceTables.SMALL);
    CompletableFuture<Api.Reply> held =
        CompletableFuture.supplyAsync(() -> api.claimHeld(late, PAGE, 20_000, false));
    Poll.until(
        "the late claim is held",
        Duration.ofSeconds(10),
        () -> wakeups.waiting(SourceTables.SMALL) == before + 1);
    api.complete(scanners.get(1), batches.get(1), List.of()).expect(200);
    Api.Reply reply = held.get(20, TimeUnit.SECONDS).expect(200);
    assertEquals("batch", reply.text("status"), "the held claim took the freed share: " + reply);
  }

  /**
   * A held claim that found the scan full does not look again while nothing changes: a notice wakes
   * it when a share frees ({@link #aHeldClaimIsWokenWhenAShareFrees}), else it looks when a
   * scanner's lease could run out. Looking at its retry hint instead (every 0.25 to 1 s) made each
   * waiting instance of a large fleet a transaction a second for nothing.
   */
  @Test
  void aHeldClaimThatFindsTheScanFullLooksAgainOnlyWhenAShareCouldFree() throws Exception {
    FullScan full = fullScan();
    Instance late = full.late();

    double looks = scanFull();
    Api.Reply quiet = api.claimHeld(late, PAGE, 3_000, false).expect(200);
    assertEquals("wait", quiet.text("status"), "nothing freed a share: " + quiet);
    assertEquals(
        looks + 2, scanFull(), "in a 3 s hold with nothing changing: its first look and its last");

    // Every scanner stalls: their leases run out in 1.5 s, which no notice announces. The held
    // claim looks again then, and is let the first expired batch.
    Db.update(
        "UPDATE rollcall.batches SET lease_expires_at = now() + interval '1500 milliseconds'"
            + " WHERE epoch_id = ? AND state IN ('scanning', 'leased')",
        full.batches().get(0).epochId());
    looks = scanFull();
    long started = System.nanoTime();
    Api.Reply expired = api.claimHeld(late, PAGE, 20_000, false).expect(200);
    long tookMs = (System.nanoTime() - started) / 1_000_000;
    assertEquals("batch", expired.text("status"), "an expired scanner's batch: " + expired);
    assertTrue(tookMs >= 1_000 && tookMs < 10_000, "answered when the leases ran out: " + tookMs);
    assertTrue(scanFull() - looks <= 2, "looked when the leases could run out, not every second");
  }

  @Test
  void claimsQueuedForTheEpochsLockCountTheScannersUnderIt() throws Exception {
    // One instance works the scan; the others' first looks all see room for themselves.
    Instance first = api.register(SourceTables.SMALL, deploy, "first");
    Batch batch = api.claimBatch(first, PAGE);
    List<Instance> queued = instances(limit);
    List<CompletableFuture<Api.Reply>> answers = new ArrayList<>();
    try (Connection held = Db.holdingEpochLock(batch.epochId())) {
      for (Instance i : queued) {
        answers.add(CompletableFuture.supplyAsync(() -> api.claim(i, PAGE)));
      }
      Poll.until(
          "one claim waits for the epoch's lock, the others queue behind it",
          Duration.ofSeconds(10),
          () ->
              Db.waitingForEpochLock() == 1
                  && claims.queuedForLock(SourceTables.SMALL, batch.epochId()) == limit - 1);
      held.rollback();
    }
    int got = 0;
    int waited = 0;
    for (CompletableFuture<Api.Reply> a : answers) {
      String status = a.get(30, TimeUnit.SECONDS).expect(200).text("status");
      got += "batch".equals(status) ? 1 : 0;
      waited += "wait".equals(status) ? 1 : 0;
    }
    assertEquals(limit - 1, got, "the claims that fit beside the first scanner cut a page");
    assertEquals(1, waited, "the one that did not fit waits");
    assertEquals(limit, distinctHolders(batch.epochId()));
  }

  /** A scan that {@code limit} instances work, and one more instance of the deploy. */
  private record FullScan(List<Instance> scanners, List<Batch> batches, Instance late) {}

  private FullScan fullScan() {
    List<Instance> scanners = instances(limit);
    List<Batch> batches = eachTakesAPage(scanners);
    return new FullScan(scanners, batches, api.register(SourceTables.SMALL, deploy, "late"));
  }

  /** Each instance claims a page of the deploy's pass: the scan is then full. */
  private List<Batch> eachTakesAPage(List<Instance> scanners) {
    List<Batch> batches = new ArrayList<>();
    scanners.forEach(i -> batches.add(api.claimBatch(i, PAGE)));
    return batches;
  }

  private List<Instance> instances(int n) {
    List<Instance> list = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      list.add(api.register(SourceTables.SMALL, deploy, "scanner-" + i));
    }
    return list;
  }

  private static long distinctHolders(long epochId) {
    return Db.number(
        "SELECT count(DISTINCT claimer_id) FROM rollcall.batches WHERE epoch_id = ?"
            + " AND state IN ('scanning', 'leased') AND lease_expires_at > now()",
        epochId);
  }

  private double scanFull() {
    Counter c =
        meters.find("rollcall.claims.scan.full").tag("namespace", SourceTables.SMALL).counter();
    return c == null ? 0 : c.count();
  }

  /** The "work" notices of this test's deploy that arrive within {@code ms}. */
  private List<JsonNode> workNotices(PGConnection pg, int ms) throws Exception {
    List<JsonNode> notices = new ArrayList<>();
    long deadline = System.nanoTime() + ms * 1_000_000L;
    while (System.nanoTime() < deadline) {
      PGNotification[] got = pg.getNotifications(200);
      if (got == null) {
        continue;
      }
      for (PGNotification n : got) {
        JsonNode notice = JSON.readTree(n.getParameter());
        if ("work".equals(notice.path("event").asText())
            && deploy.equals(notice.path("deploymentId").asText())) {
          notices.add(notice);
        }
      }
      if (!notices.isEmpty()) {
        break;
      }
    }
    return notices;
  }
}
