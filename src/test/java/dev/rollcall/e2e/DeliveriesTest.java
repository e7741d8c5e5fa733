package dev.rollcall.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.rollcall.e2e.EndToEndIT.Journal;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

@Tag("unit")
class DeliveriesTest {

  private static final ObjectMapper JSON = new ObjectMapper();

  private static Journal line(String replica, String event, String messageId, long t) {
    ObjectNode e = JSON.createObjectNode();
    e.put("event", event).put("runId", "run").put("messageId", messageId).put("t", t);
    return new Journal(replica, e);
  }

  private static List<String> replayedAtOnce(Journal... lines) {
    return Deliveries.replayedAtOnce(List.of(lines), List.of("run"), Map.of(), 10_000);
  }

  @Test
  void deliveriesOneAfterTheOtherAreNoDoubleReplay() {
    assertEquals(
        List.of(),
        replayedAtOnce(
            line("a", "flow-start", "m1", 100),
            line("a", "flow-end", "m1", 200),
            line("b", "flow-start", "m2", 200),
            line("b", "flow-end", "m2", 300)));
  }

  @Test
  void overlappingDeliveriesOnTwoReplicasAreADoubleReplay() {
    assertEquals(
        List.of("run"),
        replayedAtOnce(
            line("a", "flow-start", "m1", 100),
            line("b", "flow-start", "m2", 150),
            line("a", "flow-end", "m1", 200),
            line("b", "flow-end", "m2", 300)));
  }

  @Test
  void aDeliveryThatSentItsSuccessorsMessageHandedItsRunOn() {
    // The runtime re-schedules a replay: it sends m2 at 198, a peer starts it at 199, and the
    // sender's delivery returns at 201.
    assertEquals(
        List.of(),
        replayedAtOnce(
            line("a", "flow-start", "m1", 100),
            line("a", "queued", "m2", 198),
            line("b", "flow-start", "m2", 199),
            line("a", "flow-end", "m1", 201),
            line("b", "flow-end", "m2", 300)));
  }

  @Test
  void aMessageSentByAnotherReplicaOrOutsideTheDeliveryExcusesNothing() {
    assertEquals(
        List.of("run"),
        replayedAtOnce(
            line("a", "flow-start", "m1", 100),
            line("c", "queued", "m2", 150),
            line("b", "flow-start", "m2", 160),
            line("a", "flow-end", "m1", 201),
            line("b", "flow-end", "m2", 300)));
    assertEquals(
        List.of("run"),
        replayedAtOnce(
            line("a", "queued", "m2", 90),
            line("a", "flow-start", "m1", 100),
            line("b", "flow-start", "m2", 160),
            line("a", "flow-end", "m1", 201),
            line("b", "flow-end", "m2", 300)));
  }

  @Test
  void theRuntimesOwnParallelMessagesRunSideBySide() {
    // A Promise.all of two steps: the runtime sends m2 and m3 together, two peers deliver them.
    assertEquals(
        List.of(),
        replayedAtOnce(
            line("a", "flow-start", "m1", 100),
            line("a", "queued", "m2", 150),
            line("a", "queued", "m3", 151),
            line("a", "flow-end", "m1", 160),
            line("b", "flow-start", "m2", 170),
            line("c", "flow-start", "m3", 171),
            line("b", "flow-end", "m2", 300),
            line("c", "flow-end", "m3", 320)));
  }

  @Test
  void oneMessageDeliveredByTwoReplicasAtOnceIsADoubleReplay() {
    assertEquals(
        List.of("run"),
        replayedAtOnce(
            line("a", "queued", "m2", 90),
            line("a", "flow-start", "m2", 100),
            line("b", "flow-start", "m2", 150),
            line("a", "flow-end", "m2", 200),
            line("b", "flow-end", "m2", 300)));
  }

  @Test
  void aMessageSentWithoutAnIdExcusesNoDeliveryWithoutOne() {
    assertEquals(
        List.of("run"),
        replayedAtOnce(
            line("a", "flow-start", "", 100),
            line("a", "queued", "", 150),
            line("b", "flow-start", "", 160),
            line("a", "flow-end", "", 201),
            line("b", "flow-end", "", 300)));
  }

  @Test
  void anOpenDeliveryEndsWithItsReplica() {
    // a was killed at 150 (its delivery never logged an end); b starts the message at 160.
    assertEquals(
        List.of(),
        Deliveries.replayedAtOnce(
            List.of(
                line("a", "flow-start", "m1", 100),
                line("b", "flow-start", "m1", 160),
                line("b", "flow-end", "m1", 300)),
            List.of("run"),
            Map.of("a", 150L),
            10_000));
    // Without its end, it is open until now and overlaps.
    assertEquals(
        List.of("run"),
        replayedAtOnce(
            line("a", "flow-start", "m1", 100),
            line("b", "flow-start", "m1", 160),
            line("b", "flow-end", "m1", 300)));
  }
}
