package dev.rollcall.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.testing.SpanTree;
import dev.rollcall.testing.TraceSpan;
import dev.rollcall.tracing.RecoveryTraces;
import io.opentelemetry.api.common.AttributeKey;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.stream.Collectors;

/**
 * What the trace of a death's takeover must hold, linked by parent ids: the death (the root) with
 * its evidence and its declaration, the takeover's open under it (its runs handed out, skipped and
 * deferred), under the open the queue-lock release (at least one lock), a re-check for each look at
 * its deferred runs, a hand-out for each batch the takeover made, if it made any (each linked to
 * the claim that took it; together they hold the runs the open and the re-checks handed out) and
 * the close, completed.
 */
final class TakeoverTrace {

  private TakeoverTrace() {}

  /** The span named {@code name} whose attribute {@code key} is {@code value}. */
  static Optional<TraceSpan> find(List<TraceSpan> spans, String name, String key, String value) {
    return spans.stream()
        .filter(x -> x.name().equals(name) && value.equals(x.attribute(key)))
        .findFirst();
  }

  /** Fails, with the trace's tree, unless {@code trace} holds the death of {@code victim}. */
  static void check(List<TraceSpan> trace, String victim, long epoch) {
    String tree = SpanTree.render(trace);
    TraceSpan close =
        find(trace, RecoveryTraces.closed("takeover"), key(RecoveryTraces.EPOCH), "" + epoch)
            .orElseThrow(() -> new AssertionError("no close of takeover " + epoch + "\n" + tree));
    TraceSpan open = parentOf(trace, close, RecoveryTraces.opened("takeover"), tree);
    assertEquals(String.valueOf(epoch), open.attribute(key(RecoveryTraces.EPOCH)), tree);
    // Runs deferred to a re-check keep the takeover open: its close waits for them.
    number(open, RecoveryTraces.DEFERRED);
    TraceSpan death = parentOf(trace, open, RecoveryTraces.DEATH, tree);
    assertTrue(death.isRoot(), "the death is the trace's root\n" + tree);
    assertEquals(victim, death.attribute(key(RecoveryTraces.INSTANCE)), tree);
    TraceSpan evidence = onlyChild(trace, death, RecoveryTraces.EVIDENCE, tree);
    assertEquals(
        death.attribute(key(RecoveryTraces.PROOF)),
        evidence.attribute(key(RecoveryTraces.PROOF)),
        tree);
    TraceSpan declared = onlyChild(trace, death, RecoveryTraces.DECLARED_DEAD, tree);
    assertEquals(victim, declared.attribute(key(RecoveryTraces.INSTANCE)), tree);
    TraceSpan locks = onlyChild(trace, open, RecoveryTraces.LOCKS_RELEASED, tree);
    // The victim was executing steps: its worker held the queue jobs of their deliveries.
    assertTrue(number(locks, RecoveryTraces.LOCKS) >= 1, "no queue lock released\n" + tree);
    // As many batches handed out as the takeover made: none when every run it took over was
    // covered by a released queue lock (the queue delivers those again), as after most kills.
    List<TraceSpan> handOuts = children(trace, open, RecoveryTraces.handedOut("takeover"));
    for (TraceSpan h : handOuts) {
      assertEquals(1, h.links(), "a hand-out links to the claim that took it\n" + tree);
    }
    // A batch whose lease ran out is handed out again: each batch counts once.
    Map<Long, Long> runsByBatch =
        handOuts.stream()
            .collect(
                Collectors.toMap(
                    h -> number(h, RecoveryTraces.BATCH),
                    h -> number(h, RecoveryTraces.RUNS),
                    (a, b) -> a));
    // Runs a re-check found no longer reported are handed out in batches cut after the open.
    List<TraceSpan> rechecks = children(trace, open, RecoveryTraces.rechecked("takeover"));
    long recheckedOut = rechecks.stream().mapToLong(r -> number(r, RecoveryTraces.RUNS)).sum();
    long openBatches = number(open, RecoveryTraces.BATCHES);
    if (recheckedOut == 0) {
      assertEquals(openBatches, runsByBatch.size(), tree);
    } else {
      assertTrue(runsByBatch.size() > openBatches, "no batch for the re-checked runs\n" + tree);
    }
    assertEquals(
        number(open, RecoveryTraces.RUNS) + recheckedOut,
        runsByBatch.values().stream().mapToLong(Long::longValue).sum(),
        "the batches handed out hold the takeover's runs, the re-checks' included\n" + tree);
    assertEquals("completed", close.attribute(key(RecoveryTraces.CLOSE_REASON)), tree);
  }

  private static String key(AttributeKey<?> key) {
    return key.getKey();
  }

  private static long number(TraceSpan span, AttributeKey<?> key) {
    String value = span.attribute(key.getKey());
    assertTrue(value != null, span.name() + " has no " + key.getKey());
    return Long.parseLong(value);
  }

  private static TraceSpan parentOf(
      List<TraceSpan> trace, TraceSpan child, String name, String tree) {
    TraceSpan parent =
        trace.stream()
            .filter(x -> x.spanId().equals(child.parentSpanId()))
            .findFirst()
            .orElseThrow(() -> new AssertionError(child.name() + " has no parent\n" + tree));
    assertEquals(name, parent.name(), "the parent of " + child.name() + "\n" + tree);
    return parent;
  }

  private static List<TraceSpan> children(List<TraceSpan> trace, TraceSpan parent, String name) {
    return trace.stream()
        .filter(x -> x.parentSpanId().equals(parent.spanId()) && x.name().equals(name))
        .toList();
  }

  private static TraceSpan onlyChild(
      List<TraceSpan> trace, TraceSpan parent, String name, String tree) {
    List<TraceSpan> found = children(trace, parent, name);
    assertEquals(1, found.size(), name + " under " + parent.name() + "\n" + tree);
    return found.get(0);
  }
}
