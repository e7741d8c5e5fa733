package dev.rollcall.registry;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.rollcall.queue.QueueLocks;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** The messages a heartbeat's in-flight set reports: each once, in the set's order. */
@Tag("unit")
class ReportedMessagesTest {

  private static final UUID ME = UUID.randomUUID();

  private static List<String> messages(List<InFlight> set) {
    return WorkerLearning.reported(ME, Optional.of(set)).stream()
        .peek(r -> assertEquals(ME, r.instanceId()))
        .map(QueueLocks.Reported::messageId)
        .toList();
  }

  @Test
  void aShortSetKeepsEachMessageOnceAndSkipsRunsWithout() {
    assertEquals(
        List.of("m1", "m2"),
        messages(
            List.of(
                new InFlight("r1", "m1"),
                new InFlight("r2", null),
                new InFlight("r3", "m2"),
                new InFlight("r4", "m1"))));
    assertEquals(List.of(), WorkerLearning.reported(ME, Optional.empty()));
  }

  @Test
  void aLongSetDoesTheSame() {
    List<InFlight> set = new ArrayList<>();
    List<String> expected = new ArrayList<>();
    for (int i = 0; i < 5_000; i++) {
      set.add(new InFlight("r" + i, i % 3 == 0 ? null : "m" + (i % 1_000)));
    }
    for (int i = 0; i < 1_000; i++) {
      if (set.get(i).messageId() != null) {
        expected.add("m" + i);
      }
    }
    // Every message id m0..m999 whose first run carries one appears once, in first-seen order.
    List<String> got = messages(set);
    assertEquals(List.copyOf(new java.util.LinkedHashSet<>(got)), got);
    assertEquals(
        set.stream().map(InFlight::messageId).filter(m -> m != null).distinct().toList(), got);
    assertEquals(1_000, got.size());
    assertEquals(expected.get(0), got.get(0));
  }
}
