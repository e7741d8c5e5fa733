package dev.rollcall.admin;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.rollcall.recovery.Reaper;
import dev.rollcall.testing.Api.Batch;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.RollcallTestResource;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import dev.rollcall.testing.TimeTravel;
import jakarta.inject.Inject;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.List;
import java.util.UUID;
import java.util.stream.StreamSupport;
import org.junit.jupiter.api.Test;

/** The console's chart reads the last hour, minute by minute, from the ledger and the instances. */
@ServiceTest
class TimelineTest extends ApiTestBase {

  @Inject Reaper reaper;

  JsonNode timeline(String namespace) {
    return api.send(
            "GET",
            "admin/timeline" + (namespace == null ? "" : "?namespace=" + namespace),
            RollcallTestResource.ADMIN_TOKEN,
            null)
        .expect(200)
        .body();
  }

  static List<JsonNode> minutes(JsonNode timeline) {
    return StreamSupport.stream(timeline.get("minutes").spliterator(), false).toList();
  }

  static long total(JsonNode timeline, String field) {
    return minutes(timeline).stream().mapToLong(m -> m.get(field).asLong()).sum();
  }

  @Test
  void aDeathAndItsHandOutsShowInTheLastHourCountedOnceWhileInFlightAndOnceDone() {
    reaper.runOnce().await().indefinitely();
    String deploy = UUID.randomUUID().toString();
    Instance peer = api.register(SourceTables.SMALL, deploy, "peer");
    api.drain(peer, 100);
    Instance victim = api.register(SourceTables.SMALL, "next-" + deploy, "victim");
    List<String> inFlight = Db.activeRuns(SourceTables.SMALL).stream().sorted().limit(2).toList();
    api.heartbeat(victim, inFlight).expect(200);
    JsonNode before = timeline(SourceTables.SMALL);
    TimeTravel.leaseExpired(victim, Duration.ofSeconds(3));

    reaper.runOnce().await().indefinitely();
    Batch taken = api.claimBatch(peer, 100);
    JsonNode leased = timeline(SourceTables.SMALL);
    api.complete(peer, taken, List.of()).expect(200);
    JsonNode done = timeline(SourceTables.SMALL);

    assertEquals("takeover", taken.json().get("epochKind").asText());
    assertEquals(total(before, "deaths") + 1, total(leased, "deaths"));
    assertEquals(total(before, "handedOut") + 2, total(leased, "handedOut"), "in flight");
    assertEquals(total(before, "handedOut") + 2, total(done, "handedOut"), "written once done");
    JsonNode now = minutes(leased).get(59);
    assertTrue(now.get("openPasses").asLong() >= 1, now.toString());
    assertTrue(
        minutes(leased).stream()
            .anyMatch(m -> !m.get("detectionMs").isNull() && m.get("detectionMs").asLong() >= 3000),
        "the takeover opened 3 s after the lease ran out: " + leased);
    api.leave(peer).expect(204);
  }

  @Test
  void theHourHasSixtyMinutesOldestFirstEndingNowForOneNamespaceOrAll() {
    for (String namespace : new String[] {SourceTables.SMALL, null}) {
      JsonNode timeline = timeline(namespace);
      List<JsonNode> minutes = minutes(timeline);
      assertEquals(60, minutes.size());
      OffsetDateTime first = OffsetDateTime.parse(minutes.get(0).get("at").asText());
      OffsetDateTime last = OffsetDateTime.parse(minutes.get(59).get("at").asText());
      assertEquals(Duration.ofMinutes(59), Duration.between(first, last));
      assertTrue(Duration.between(last, OffsetDateTime.now()).abs().toMinutes() <= 1, last + "");
      assertEquals(namespace == null ? "" : namespace, timeline.path("namespace").asText(""));
    }
  }

  @Test
  void theTimelineNeedsTheAdminToken() {
    api.send("GET", "admin/timeline", null, null).expect(401);
    api.send("GET", "admin/timeline", "not-the-token", null).expect(403);
  }
}
