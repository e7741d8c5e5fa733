package dev.rollcall.testing;

import java.util.Comparator;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;

/**
 * A trace as an indented tree, as the tracing tests print it: each span's name, its duration, its
 * attributes and how many links it has, children under their parent by start time. Spans whose
 * parent is not among them are roots.
 */
public final class SpanTree {

  private SpanTree() {}

  public static String render(List<TraceSpan> trace) {
    StringBuilder out = new StringBuilder();
    Set<String> ids = trace.stream().map(TraceSpan::spanId).collect(Collectors.toSet());
    trace.stream()
        .filter(s -> !ids.contains(s.parentSpanId()))
        .sorted(Comparator.comparingLong(TraceSpan::startNanos))
        .forEach(root -> branch(trace, root, 0, out));
    return out.toString();
  }

  private static void branch(List<TraceSpan> trace, TraceSpan span, int depth, StringBuilder out) {
    out.append("  ".repeat(depth))
        .append(span.name())
        .append(String.format(" %.1f ms ", span.durationMs()))
        .append(span.attributes())
        .append(span.links() == 0 ? "" : " links " + span.links())
        .append('\n');
    trace.stream()
        .filter(s -> s.parentSpanId().equals(span.spanId()))
        .sorted(Comparator.comparingLong(TraceSpan::startNanos))
        .forEach(child -> branch(trace, child, depth + 1, out));
  }
}
