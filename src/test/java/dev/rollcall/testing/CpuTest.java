package dev.rollcall.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

@Tag("unit")
class CpuTest {

  @Test
  void aThreadCountsFromItsOwnFirstReadAndOneThatEndedIsLeftOut() {
    Map<Long, Cpu.ThreadTime> before =
        Map.of(
            1L, new Cpu.ThreadTime("C2 CompilerThre", 500),
            2L, new Cpu.ThreadTime("C2 CompilerThre", 900), // ends before the second read
            3L, new Cpu.ThreadTime("vert.x-eventloop-thread-", 100));
    Map<Long, Cpu.ThreadTime> after =
        Map.of(
            1L, new Cpu.ThreadTime("C2 CompilerThre", 540),
            3L, new Cpu.ThreadTime("vert.x-eventloop-thread-", 400),
            4L, new Cpu.ThreadTime("C2 CompilerThre", 30)); // started in between

    Map<String, Long> used = Cpu.usedByName(before, after);

    // Summed by name over the two reads, the ended thread would have made this 570 - 1400 < 0.
    assertEquals(70L, used.get("C2 CompilerThre"));
    assertEquals(300L, used.get("vert.x-eventloop-thread-"));
    assertEquals(
        List.of("vert.x-eventloop-thread-", "C2 CompilerThre"), List.copyOf(used.keySet()));
  }

  @Test
  void aThreadIdReusedUnderAnotherNameCountsFromItsStart() {
    Map<Long, Cpu.ThreadTime> before = Map.of(7L, new Cpu.ThreadTime("VM Thread", 800));
    Map<Long, Cpu.ThreadTime> after = Map.of(7L, new Cpu.ThreadTime("C1 CompilerThre", 20));

    assertEquals(Map.of("C1 CompilerThre", 20L), Cpu.usedByName(before, after));
  }

  @Test
  void readsThisProcesssOwnThreads() {
    Map<Long, Cpu.ThreadTime> threads = Cpu.threads(ProcessHandle.current().pid());

    assertFalse(threads.isEmpty());
    assertTrue(threads.values().stream().allMatch(t -> t.millis() >= 0 && !t.name().isEmpty()));
  }
}
