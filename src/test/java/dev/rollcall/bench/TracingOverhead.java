package dev.rollcall.bench;

import dev.rollcall.testing.OtlpReceiver;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * What tracing costs the service under load ({@code -Dbench.tracing-pairs=N}): N pairs of load
 * benchmark runs, one with tracing off (no OTLP endpoint, as a deployment without a collector) and
 * one with tracing on, exporting over OTLP/HTTP to a receiver in this process ({@link
 * OtlpReceiver}), so that every span is built, batched, encoded and sent. Every other pair runs
 * tracing on first; each run has a database and a service process of its own. Prints each run's
 * heartbeat and claim p50 and p99, and per figure the mean of the pairs' differences (on − off)
 * with its 95 % interval ({@link PairedDifferences}). Figures, not assertions.
 */
final class TracingOverhead {

  private TracingOverhead() {}

  /** One load benchmark run, its service also given {@code settings}. */
  interface Load {
    LoadFigures run(Map<String, String> settings) throws Exception;
  }

  /** One pair's runs, and whether tracing on ran first. */
  record Pair(LoadFigures off, LoadFigures on, boolean onFirst, String exported) {}

  static void measure(int pairs, Load load) throws Exception {
    List<Pair> done = new ArrayList<>();
    for (int i = 0; i < pairs; i++) {
      boolean onFirst = i % 2 == 1;
      LoadFigures off = null;
      LoadFigures on = null;
      String exported = "";
      for (boolean tracing : onFirst ? new boolean[] {true, false} : new boolean[] {false, true}) {
        System.out.printf(
            "%nTracing overhead, pair %d of %d: tracing %s (load %s)%n",
            i + 1, pairs, tracing ? "on" : "off", Latencies.loadAverage());
        if (tracing) {
          try (OtlpReceiver receiver = OtlpReceiver.start()) {
            on = load.run(receiver.serviceSettings());
            exported = receiver.describe();
          }
        } else {
          off = load.run(Map.of());
        }
      }
      done.add(new Pair(off, on, onFirst, exported));
      System.out.printf("%n%s%n", table(done));
    }
  }

  /** Each pair's figures, then the mean difference (on − off) of each figure with its interval. */
  static String table(List<Pair> pairs) {
    StringBuilder out = new StringBuilder();
    out.append("| pair | first | tracing |");
    LoadFigures.FIGURES.forEach(f -> out.append(' ').append(f.name()).append(" (ms) |"));
    out.append(" exported |\n|---|---|---|");
    LoadFigures.FIGURES.forEach(f -> out.append("---|"));
    out.append("---|\n");
    for (int i = 0; i < pairs.size(); i++) {
      Pair p = pairs.get(i);
      row(out, i + 1, p, false);
      row(out, i + 1, p, true);
    }
    out.append("\nmean of the pairs' differences, tracing on − off (ms):\n");
    for (LoadFigures.Figure f : LoadFigures.FIGURES) {
      List<Double> diffs =
          pairs.stream()
              .map(p -> (double) (f.of().applyAsLong(p.on()) - f.of().applyAsLong(p.off())))
              .toList();
      out.append(String.format("  %-14s %s%n", f.name(), PairedDifferences.of(diffs).describe()));
    }
    return out.toString();
  }

  private static void row(StringBuilder out, int n, Pair pair, boolean tracing) {
    LoadFigures run = tracing ? pair.on() : pair.off();
    out.append(
        String.format(
            "| %d | %s | %s |", n, pair.onFirst() ? "on" : "off", tracing ? "on" : "off"));
    LoadFigures.FIGURES.forEach(f -> out.append(' ').append(f.of().applyAsLong(run)).append(" |"));
    out.append(' ').append(tracing ? pair.exported() : "").append(" |\n");
  }
}
