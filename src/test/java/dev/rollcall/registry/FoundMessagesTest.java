package dev.rollcall.registry;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.queue.QueueLocks.Reported;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

@Tag("unit")
class FoundMessagesTest {

  @Test
  void aMessageIsFoundForTheInstanceThatReportedItOnly() {
    FoundMessages found = new FoundMessages(10);
    UUID a = UUID.randomUUID();
    found.addAll(List.of(new Reported(a, "msg_1")));
    assertTrue(found.contains(new Reported(a, "msg_1")));
    assertFalse(found.contains(new Reported(UUID.randomUUID(), "msg_1")));
    assertFalse(found.contains(new Reported(a, "msg_2")));
  }
}
