package dev.rollcall.bench;

import dev.rollcall.testing.OtlpReceiver;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Pairs of load benchmark runs that differ in one thing, side A against side B:
 *
 * <ul>
 *   <li>what tracing costs ({@code -Dbench.tracing-pairs=N}): tracing off (no OTLP endpoint, as a
 *       deployment without a collector) against on, exporting over OTLP/HTTP to a receiver in this
 *       process ({@link OtlpReceiver}), so that every span is built, batched, encoded and sent;
 *   <li>what a change costs ({@code -Dbench.baseline-pairs=N -Dbench.baseline-app=DIR}): the
 *       service built from another commit (DIR is its {@code target/quarkus-app}, made by {@code
 *       ./mvnw -B package -DskipTests} in a checkout of that commit) against this build.
 * </ul>
 *
 * Every other pair runs B first; each run has a database and a service process of its own. Prints
 * each run's heartbeat and claim p50 and p99, and per figure the mean of the pairs' differences (B
 * − A) with its 95 % interval ({@link PairedDifferences}). Figures, not assertions.
 */
final class LoadPairs {

  private LoadPairs() {}

  /** One load benchmark run of the service packaged in {@code app}, also given {@code settings}. */
  interface Load {
    LoadFigures run(Path app, Map<String, String> settings) throws Exception;
  }

  /** One run as a side, and what the table says of it beside its figures. */
  record Outcome(LoadFigures figures, String note) {}

  /** One side of every pair: its label in the table and how it runs the load. */
  record Side(String label, SideRun run) {}

  interface SideRun {
    Outcome run(Load load) throws Exception;
  }

  /** One pair's runs, and whether B ran first. */
  record Pair(Outcome a, Outcome b, boolean bFirst) {}

  /** Tracing off (A) against tracing on, exported to a receiver in this process (B). */
  static List<Side> tracing(Path thisBuild) {
    return List.of(
        new Side("off", load -> new Outcome(load.run(thisBuild, Map.of()), "")),
        new Side(
            "on",
            load -> {
              try (OtlpReceiver receiver = OtlpReceiver.start()) {
                LoadFigures figures = load.run(thisBuild, receiver.serviceSettings());
                return new Outcome(figures, receiver.describe());
              }
            }));
  }

  /** The service built from another commit (A) against this build (B). */
  static List<Side> builds(Path baseline, Path thisBuild) {
    if (!Files.exists(baseline.resolve("quarkus-run.jar"))) {
      throw new IllegalArgumentException(
          "bench.baseline-app: " + baseline + " holds no quarkus-run.jar");
    }
    return List.of(
        new Side(
            "baseline", load -> new Outcome(load.run(baseline, Map.of()), baseline.toString())),
        new Side("this", load -> new Outcome(load.run(thisBuild, Map.of()), "")));
  }

  static void measure(String what, int pairs, List<Side> sides, Load load) throws Exception {
    Side a = sides.get(0);
    Side b = sides.get(1);
    List<Pair> done = new ArrayList<>();
    for (int i = 0; i < pairs; i++) {
      boolean bFirst = i % 2 == 1;
      Outcome[] ran = new Outcome[2];
      for (int side : bFirst ? new int[] {1, 0} : new int[] {0, 1}) {
        Side s = sides.get(side);
        System.out.printf(
            "%n%s pairs, pair %d of %d: %s %s (load %s)%n",
            what, i + 1, pairs, what, s.label(), Latencies.loadAverage());
        ran[side] = s.run().run(load);
      }
      done.add(new Pair(ran[0], ran[1], bFirst));
      System.out.printf("%n%s%n", table(what, a.label(), b.label(), done));
    }
  }

  /** Each pair's figures, then the mean difference (B − A) of each figure with its interval. */
  static String table(String what, String a, String b, List<Pair> pairs) {
    StringBuilder out = new StringBuilder();
    out.append("| pair | first | ").append(what).append(" |");
    LoadFigures.FIGURES.forEach(f -> out.append(' ').append(f.name()).append(" (ms) |"));
    out.append(" note |\n|---|---|---|");
    LoadFigures.FIGURES.forEach(f -> out.append("---|"));
    out.append("---|\n");
    for (int i = 0; i < pairs.size(); i++) {
      Pair p = pairs.get(i);
      String first = p.bFirst() ? b : a;
      row(out, i + 1, first, a, p.a());
      row(out, i + 1, first, b, p.b());
    }
    out.append("\nmean of the pairs' differences, ")
        .append(what)
        .append(' ')
        .append(b)
        .append(" − ")
        .append(a)
        .append(" (ms):\n");
    for (LoadFigures.Figure f : LoadFigures.FIGURES) {
      List<Double> diffs =
          pairs.stream()
              .map(
                  p ->
                      (double)
                          (f.of().applyAsLong(p.b().figures())
                              - f.of().applyAsLong(p.a().figures())))
              .toList();
      out.append(String.format("  %-14s %s%n", f.name(), PairedDifferences.of(diffs).describe()));
    }
    return out.toString();
  }

  private static void row(StringBuilder out, int n, String first, String label, Outcome run) {
    out.append(String.format("| %d | %s | %s |", n, first, label));
    LoadFigures.FIGURES.forEach(
        f -> out.append(' ').append(f.of().applyAsLong(run.figures())).append(" |"));
    out.append(' ').append(run.note()).append(" |\n");
  }
}
