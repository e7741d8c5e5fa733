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

  /** An engine message id made at {@code ms}, {@code tail} telling ids of one millisecond apart. */
  private static String messageMadeAt(long ms, char tail) {
    String crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    StringBuilder time = new StringBuilder();
    for (int i = 0; i < 10; i++, ms /= 32) {
      time.insert(0, crockford.charAt((int) (ms % 32)));
    }
    return "msg_" + time + "000000000000000" + tail;
  }

  @Test
  void aMessageIdTellsWhenItWasMade() {
    assertEquals(1_796_553_035_332L, Deliveries.ulidMillis(messageMadeAt(1_796_553_035_332L, 'X')));
    assertEquals(-1, Deliveries.ulidMillis("m1"));
  }

  @Test
  void aSendWhoseLineTheSendersEndCutOffStillCountsAsTheRuntimes() {
    // a sends three messages of a Promise.all at 1 000 and is stopped at 1 001, after the queue
    // took all three and before two of their queued lines; b and c deliver them side by side.
    String m7 = messageMadeAt(1_000, '7');
    String m8 = messageMadeAt(1_000, '8');
    String m9 = messageMadeAt(1_000, '9');
    List<Journal> lines =
        List.of(
            line("a", "sending", "", 1_000),
            line("a", "sending", "", 1_000),
            line("a", "sending", "", 1_000),
            line("a", "queued", m7, 1_001),
            line("a", "exit", "", 1_001),
            line("b", "flow-start", m7, 1_100),
            line("c", "flow-start", m8, 1_120),
            line("c", "flow-end", m8, 1_200),
            line("b", "flow-end", m7, 1_300),
            line("c", "flow-start", m9, 1_310),
            line("c", "flow-end", m9, 1_400));
    assertEquals(java.util.Set.of(m7, m8, m9), Deliveries.sentByRuntime(lines, Map.of()).keySet());
    assertEquals(List.of(), Deliveries.replayedAtOnce(lines, List.of("run"), Map.of(), 10_000));
  }

  @Test
  void aMessageMadeAfterTheSendersEndIsRecoverys() {
    // a's one unconfirmed send cannot have made a message after a ended (killed at 1 050): the
    // message delivered beside b's is a recovery job.
    String m7 = messageMadeAt(1_000, '7');
    String recovery = messageMadeAt(1_200, 'R');
    List<Journal> lines =
        List.of(
            line("a", "sending", "", 1_000),
            line("a", "queued", m7, 1_001),
            line("a", "sending", "", 1_040),
            line("b", "flow-start", m7, 1_100),
            line("c", "flow-start", recovery, 1_250),
            line("c", "flow-end", recovery, 1_300),
            line("b", "flow-end", m7, 1_400));
    assertEquals(
        java.util.Set.of(m7), Deliveries.sentByRuntime(lines, Map.of("a", 1_050L)).keySet());
    assertEquals(
        List.of("run"),
        Deliveries.replayedAtOnce(lines, List.of("run"), Map.of("a", 1_050L), 10_000));
  }

  @Test
  void sendsThatEndInAnyOrderAreMatchedAsABurst() {
    // a sends four messages at 2 585–2 606; the queue takes all four; the two queued lines a wrote
    // before it was killed at 2 650 are of the later two (the first two sends' awaits had not run
    // yet). The two unjournaled ones, made at 2 585, are a's all the same.
    String early1 = messageMadeAt(2_585, '1');
    String early2 = messageMadeAt(2_586, '2');
    String late1 = messageMadeAt(2_600, '3');
    String late2 = messageMadeAt(2_601, '4');
    List<Journal> lines =
        List.of(
            line("a", "sending", "", 2_584),
            line("a", "sending", "", 2_585),
            line("a", "sending", "", 2_599),
            line("a", "sending", "", 2_600),
            line("a", "queued", late1, 2_606),
            line("a", "queued", late2, 2_606),
            line("b", "flow-start", early1, 2_700),
            line("b", "flow-start", early2, 2_710));
    assertEquals(
        java.util.Set.of(early1, early2, late1, late2),
        Deliveries.sentByRuntime(lines, Map.of("a", 2_650L)).keySet());
  }
}
