package dev.rollcall.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.rollcall.e2e.EndToEndIT.Journal;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

@Tag("unit")
class TakeoverRepeatsTest {

  private static final ObjectMapper JSON = new ObjectMapper();
  private static final long DIED_AT = 10_000;

  private static Journal start(String replica, String step, long t) {
    ObjectNode e = JSON.createObjectNode();
    e.put("event", "step-start").put("runId", "run").put("stepId", step).put("t", t);
    return new Journal(replica, e);
  }

  private static Set<String> repeats(Journal... lines) {
    return TakeoverRepeats.of(List.of(lines), "cut", DIED_AT);
  }

  @Test
  void aStepTheReplicaBeganAndAPeerBeganAfterItsDeathIsATakeoverRepeat() {
    assertEquals(Set.of("s1"), repeats(start("cut", "s1", 4_000), start("peer", "s1", 11_000)));
  }

  @Test
  void aConcurrentReplayOnAPeerBeforeTheDeathIsNot() {
    assertEquals(Set.of(), repeats(start("cut", "s1", 4_000), start("peer", "s1", 4_050)));
  }

  @Test
  void stepsTheReplicaBeganAfterItsDeathAreNot() {
    // Registered again after the heal, it runs steps a peer may run too: not the takeover's doing.
    assertEquals(Set.of(), repeats(start("cut", "s1", 20_000), start("peer", "s1", 20_040)));
  }

  @Test
  void aStepOnlyPeersRanIsNot() {
    assertEquals(Set.of(), repeats(start("a", "s1", 4_000), start("b", "s1", 11_000)));
  }
}
