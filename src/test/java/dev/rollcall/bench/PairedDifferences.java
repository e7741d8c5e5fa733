package dev.rollcall.bench;

import java.util.List;

/**
 * The mean of paired differences (say, a scenario's wall time with two service replicas minus the
 * same scenario's with one, run one after the other) and its two-sided 95 % interval by Student's
 * t. A noisy machine makes single pairs disagree; the interval says how large a difference the
 * pairs can still hide. Pairs are assumed independent of one another: each pair ran at its own
 * time, and the benchmark alternates which of the two ran first.
 */
record PairedDifferences(int n, double mean, double low, double high) {

  // t(0.975, df) for df = 1..30; beyond, the normal quantile is within 2 %.
  private static final double[] T975 = {
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042
  };

  /** The mean and 95 % interval of {@code diffs}; a single pair gives no interval (NaN bounds). */
  static PairedDifferences of(List<Double> diffs) {
    int n = diffs.size();
    if (n == 0) {
      throw new IllegalArgumentException("no pairs");
    }
    double mean = diffs.stream().mapToDouble(Double::doubleValue).sum() / n;
    if (n == 1) {
      return new PairedDifferences(1, mean, Double.NaN, Double.NaN);
    }
    double squares = diffs.stream().mapToDouble(d -> (d - mean) * (d - mean)).sum();
    double half = t975(n - 1) * Math.sqrt(squares / (n - 1)) / Math.sqrt(n);
    return new PairedDifferences(n, mean, mean - half, mean + half);
  }

  static double t975(int df) {
    return df <= T975.length ? T975[df - 1] : 1.960;
  }

  /** "n = 8, mean −0.12, 95 % interval −0.45 to +0.21" (in the differences' own unit). */
  String describe() {
    if (Double.isNaN(low)) {
      return String.format("n = 1, %+.2f (no interval from one pair)", mean);
    }
    return String.format("n = %d, mean %+.2f, 95 %% interval %+.2f to %+.2f", n, mean, low, high);
  }
}
