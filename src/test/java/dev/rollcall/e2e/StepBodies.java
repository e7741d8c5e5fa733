package dev.rollcall.e2e;

import dev.rollcall.e2e.EndToEndIT.Journal;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * How often each step's body ran, as the example app's replicas journaled it ({@code step-start}
 * and {@code step-end} lines, by step id): what a user of the workflow sees, whatever the engine's
 * tables say. A body that ran twice is allowed only as an at-least-once re-run of an interrupted
 * step; {@link #againAfterEnd} names those whose earlier run had ended (the step's result was
 * computed, and lost or ignored).
 */
record StepBodies(Map<String, List<Long>> starts, Set<String> againAfterEnd) {

  static StepBodies of(List<Journal> journal, Collection<String> runIds) {
    Set<String> runs = new HashSet<>(runIds);
    Map<String, List<Long>> starts = new HashMap<>();
    Set<String> ended = new HashSet<>();
    Set<String> again = new TreeSet<>();
    journal.stream()
        .filter(j -> runs.contains(j.runId()))
        .filter(j -> j.event().equals("step-start") || j.event().equals("step-end"))
        .sorted(Comparator.comparingLong(Journal::t))
        .forEach(
            j -> {
              String step = j.e().path("stepId").asText();
              if (j.event().equals("step-end")) {
                ended.add(step);
              } else {
                List<Long> at = starts.computeIfAbsent(step, s -> new ArrayList<>());
                at.add(j.t());
                if (at.size() > 1 && ended.contains(step)) {
                  again.add(step);
                }
              }
            });
    return new StepBodies(Map.copyOf(starts), Set.copyOf(again));
  }

  /** How often the body of {@code stepId} ran (0 if never). */
  int of(String stepId) {
    return startedAt(stepId).size();
  }

  /** When the body of {@code stepId} started, each time (epoch ms, the replicas' clock). */
  List<Long> startedAt(String stepId) {
    return starts.getOrDefault(stepId, List.of());
  }

  /** How often the body of {@code stepId} started at or after {@code t} (epoch ms). */
  int since(String stepId, long t) {
    return (int) startedAt(stepId).stream().filter(at -> at >= t).count();
  }

  /** The most runs of one step's body. */
  int max() {
    return starts.values().stream().mapToInt(List::size).max().orElse(0);
  }

  /** Steps whose body ran more than once. */
  int twice() {
    return (int) starts.values().stream().filter(at -> at.size() > 1).count();
  }
}
