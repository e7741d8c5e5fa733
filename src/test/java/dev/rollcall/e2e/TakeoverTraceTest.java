package dev.rollcall.e2e;

import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.rollcall.testing.TraceSpan;
import dev.rollcall.tracing.RecoveryTraces;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

@Tag("unit")
class TakeoverTraceTest {

  static final String VICTIM = "8c0a0f4e-0000-4000-8000-000000000001";

  @Test
  void aDeathLinkedFromEvidenceToCloseHoldsEvenWithABatchHandedOutTwice() {
    List<TraceSpan> trace = new ArrayList<>(death());
    trace.add(span("h3", "o", RecoveryTraces.handedOut("takeover"), 1, handOut(8, 2)));
    TakeoverTrace.check(trace, VICTIM, 42);
  }

  @Test
  void aTakeoverWhoseRunsTheQueueDeliversAgainHandsOutNothing() {
    List<TraceSpan> trace =
        new ArrayList<>(death().stream().filter(s -> !s.spanId().startsWith("h")).toList());
    trace.replaceAll(
        s ->
            s.spanId().equals("o")
                ? span(
                    "o",
                    "d",
                    s.name(),
                    0,
                    Map.of(
                        key(RecoveryTraces.EPOCH),
                        "42",
                        key(RecoveryTraces.RUNS),
                        "0",
                        key(RecoveryTraces.BATCHES),
                        "0",
                        key(RecoveryTraces.DEFERRED),
                        "3"))
                : s);
    TakeoverTrace.check(trace, VICTIM, 42);
  }

  @Test
  void aRunHandedOutByAReCheckIsInABatchCutAfterTheOpen() {
    List<TraceSpan> trace = new ArrayList<>(death());
    trace.add(span("r", "o", RecoveryTraces.rechecked("takeover"), 0, recheck(1)));
    trace.add(span("h4", "o", RecoveryTraces.handedOut("takeover"), 1, handOut(9, 1)));
    TakeoverTrace.check(trace, VICTIM, 42);
  }

  @Test
  void aReCheckWhoseRunNoBatchHoldsFails() {
    List<TraceSpan> trace = new ArrayList<>(death());
    trace.add(span("r", "o", RecoveryTraces.rechecked("takeover"), 0, recheck(1)));
    assertThrows(AssertionError.class, () -> TakeoverTrace.check(trace, VICTIM, 42));
  }

  @Test
  void aCloseInATraceOfItsOwnFails() {
    List<TraceSpan> trace =
        new ArrayList<>(death().stream().filter(s -> !s.spanId().equals("c")).toList());
    trace.add(new TraceSpan("t2", "c", "", RecoveryTraces.closed("takeover"), 0, 1, closed(), 0));
    assertThrows(AssertionError.class, () -> TakeoverTrace.check(trace, VICTIM, 42));
  }

  @Test
  void aHandOutMissingFails() {
    List<TraceSpan> trace = death().stream().filter(s -> !s.spanId().equals("h2")).toList();
    assertThrows(AssertionError.class, () -> TakeoverTrace.check(trace, VICTIM, 42));
  }

  @Test
  void noLockReleasedFails() {
    List<TraceSpan> trace = new ArrayList<>(death());
    trace.replaceAll(
        s ->
            s.spanId().equals("l")
                ? span("l", "o", RecoveryTraces.LOCKS_RELEASED, 0, Map.of(key(LOCKS), "0"))
                : s);
    assertThrows(AssertionError.class, () -> TakeoverTrace.check(trace, VICTIM, 42));
  }

  private static final io.opentelemetry.api.common.AttributeKey<Long> LOCKS = RecoveryTraces.LOCKS;

  /** A takeover of 5 runs in two batches (7: 3 runs, 8: 2), each handed out once. */
  static List<TraceSpan> death() {
    return List.of(
        span("d", "", RecoveryTraces.DEATH, 0, who("session-lost")),
        span("e", "d", RecoveryTraces.EVIDENCE, 0, who("session-lost")),
        span("x", "d", RecoveryTraces.DECLARED_DEAD, 0, who("session-lost")),
        span(
            "o",
            "d",
            RecoveryTraces.opened("takeover"),
            0,
            Map.of(
                key(RecoveryTraces.EPOCH),
                "42",
                key(RecoveryTraces.RUNS),
                "5",
                key(RecoveryTraces.BATCHES),
                "2",
                key(RecoveryTraces.DEFERRED),
                "0")),
        span("l", "o", RecoveryTraces.LOCKS_RELEASED, 0, Map.of(key(LOCKS), "2")),
        span("h1", "o", RecoveryTraces.handedOut("takeover"), 1, handOut(7, 3)),
        span("h2", "o", RecoveryTraces.handedOut("takeover"), 1, handOut(8, 2)),
        span("c", "o", RecoveryTraces.closed("takeover"), 0, closed()));
  }

  static Map<String, String> who(String proof) {
    return Map.of(key(RecoveryTraces.INSTANCE), VICTIM, key(RecoveryTraces.PROOF), proof);
  }

  static Map<String, String> handOut(long batch, long runs) {
    return Map.of(key(RecoveryTraces.BATCH), "" + batch, key(RecoveryTraces.RUNS), "" + runs);
  }

  static Map<String, String> recheck(long handedOut) {
    return Map.of(key(RecoveryTraces.RUNS), "" + handedOut, key(RecoveryTraces.RECHECKED), "1");
  }

  static Map<String, String> closed() {
    return Map.of(key(RecoveryTraces.EPOCH), "42", key(RecoveryTraces.CLOSE_REASON), "completed");
  }

  static String key(io.opentelemetry.api.common.AttributeKey<?> k) {
    return k.getKey();
  }

  /** A span of trace t1. */
  static TraceSpan span(
      String id, String parent, String name, int links, Map<String, String> attributes) {
    return new TraceSpan("t1", id, parent, name, 0, 1_000_000, attributes, links);
  }
}
