package dev.rollcall.bench;

/**
 * Whether a load benchmark run measured its own driver rather than the service: the run's
 * heartbeats waited in the driver (from when due until they had one of its connections) or its
 * claims left their claimer late (its thread still busy with the claimer's own heartbeat, leave or
 * registration) by a p99 over {@code -Dbench.max-driver-lag-ms} (50). A point of a curve where that
 * is so says how far the driver kept up, not how far the service does: {@code bench/curve} leaves
 * it out. A figure without samples (−1: no claimers) says nothing either way.
 */
final class DriverLag {

  static final String PROPERTY = "bench.max-driver-lag-ms";
  static final long DEFAULT_MAX_MS = 50;

  private DriverLag() {}

  /** The threshold in force: {@code -Dbench.max-driver-lag-ms}, else 50 ms. */
  static long maxMs() {
    return Long.getLong(PROPERTY, DEFAULT_MAX_MS);
  }

  /** True when the heartbeats' wait p99 or the claims' lateness p99 (ms) is over {@code maxMs}. */
  static boolean lagging(long heartbeatWaitP99Ms, long claimLateP99Ms, long maxMs) {
    return heartbeatWaitP99Ms > maxMs || claimLateP99Ms > maxMs;
  }
}
