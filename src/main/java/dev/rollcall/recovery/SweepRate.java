package dev.rollcall.recovery;

/**
 * How many runs a claim may scan: a sweep reads at most {@code maxRunsPerSecond} times its age (by
 * the database's clock), so it never floods the engine's queue; other passes are not limited.
 */
final class SweepRate {

  private SweepRate() {}

  /**
   * Runs this claim may scan, from 0 to {@code maxRuns}. An epoch younger than a millisecond counts
   * as one millisecond old.
   */
  static int allowed(
      EpochKind kind, long maxRunsPerSecond, long ageMs, long runsScanned, int maxRuns) {
    if (kind != EpochKind.SWEEP) {
      return maxRuns;
    }
    long budget = maxRunsPerSecond * Math.max(1, ageMs) / 1000;
    return (int) Math.max(0, Math.min(maxRuns, budget - runsScanned));
  }
}
