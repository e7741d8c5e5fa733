package dev.rollcall.bench;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/** Nearest-rank percentiles of latency samples, as the benchmarks print them. */
final class Latencies {

  private Latencies() {}

  /** The {@code q} quantile (0..1] of sorted samples, by nearest rank. */
  static long percentile(List<Long> sorted, double q) {
    return sorted.get(Math.max(0, (int) Math.ceil(q * sorted.size()) - 1));
  }

  /** {@code n=… p50=… ms p99=… ms max=… ms}, or {@code no samples}. */
  static String summary(List<Long> samples) {
    if (samples.isEmpty()) {
      return "no samples";
    }
    List<Long> ms = sorted(samples);
    return String.format(
        "n=%d p50=%d ms p99=%d ms max=%d ms",
        ms.size(), percentile(ms, 0.50), percentile(ms, 0.99), ms.get(ms.size() - 1));
  }

  /**
   * One markdown table row: label, n, p50, p99, max in seconds, the p99 target, and whether the p99
   * meets it (samples never taken over fail it).
   */
  static String markdownRow(String label, List<Long> samples, int missing, long targetMs) {
    if (samples.isEmpty()) {
      return String.format(
          "| %s | takeover batch claimed | 0 | – | – | – | ≤ %s | no |", label, seconds(targetMs));
    }
    List<Long> ms = sorted(samples);
    long p99 = percentile(ms, 0.99);
    return String.format(
        "| %s | takeover batch claimed | %d%s | %s | %s | %s | ≤ %s | %s |",
        label,
        ms.size(),
        missing > 0 ? " (+" + missing + " never)" : "",
        seconds(percentile(ms, 0.50)),
        seconds(p99),
        seconds(ms.get(ms.size() - 1)),
        seconds(targetMs),
        p99 <= targetMs && missing == 0 ? "yes" : "no");
  }

  private static String seconds(long ms) {
    return String.format("%.2f s", ms / 1000.0);
  }

  private static List<Long> sorted(List<Long> samples) {
    List<Long> ms = new ArrayList<>(samples);
    Collections.sort(ms);
    return ms;
  }

  /**
   * The 1, 5 and 15 minute load averages (Linux): figures measured beside other work are not
   * comparable.
   */
  static String loadAverage() {
    try {
      String[] f = Files.readString(Path.of("/proc/loadavg")).split(" ");
      return f[0] + " " + f[1] + " " + f[2];
    } catch (IOException | RuntimeException e) {
      return "unknown";
    }
  }
}
