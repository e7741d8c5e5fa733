package dev.rollcall.bench;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/** Nearest-rank percentiles of latency samples, as the benchmarks print them. */
public final class Latencies {

  private Latencies() {}

  /** The {@code q} quantile (0..1] of sorted samples, by nearest rank. */
  public static long percentile(List<Long> sorted, double q) {
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
   * One markdown table row: from, to, n, p50, p99, max in seconds, the p99 target, and whether the
   * p99 meets it (samples never taken over fail it; a row with no samples at all was not measured).
   */
  static String markdownRow(
      String from, String to, List<Long> samples, int missing, long targetMs) {
    if (samples.isEmpty()) {
      // Nothing of that kind was asked for (say kills=0), or none of it finished.
      return String.format(
          "| %s | %s | 0%s | – | – | – | ≤ %s | %s |",
          from,
          to,
          missing > 0 ? " (+" + missing + " never)" : "",
          seconds(targetMs),
          missing > 0 ? "no" : "not measured");
    }
    List<Long> ms = sorted(samples);
    long p99 = percentile(ms, 0.99);
    return String.format(
        "| %s | %s | %d%s | %s | %s | %s | ≤ %s | %s |",
        from,
        to,
        ms.size(),
        missing > 0 ? " (+" + missing + " never)" : "",
        seconds(percentile(ms, 0.50)),
        seconds(p99),
        seconds(ms.get(ms.size() - 1)),
        seconds(targetMs),
        p99 <= targetMs && missing == 0 ? "yes" : "no");
  }

  /** The machine's load averages over 1, 5 and 15 minutes (Linux), or {@code unknown}. */
  public static String loadAverage() {
    try {
      String[] f = Files.readString(Path.of("/proc/loadavg")).split(" ");
      return f[0] + " " + f[1] + " " + f[2];
    } catch (IOException | RuntimeException e) {
      return "unknown";
    }
  }

  private static String seconds(long ms) {
    return String.format("%.2f s", ms / 1000.0);
  }

  private static List<Long> sorted(List<Long> samples) {
    List<Long> ms = new ArrayList<>(samples);
    Collections.sort(ms);
    return ms;
  }
}
