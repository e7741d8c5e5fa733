package dev.rollcall.recovery;

import java.util.Optional;
import java.util.random.RandomGenerator;

/** When a claimer told to wait should look again: the {@code retryAfterMs} of a wait answer. */
final class WaitHints {

  private WaitHints() {}

  /**
   * Jitter between {@code minMs} and {@code maxMs} spreads waiting claimers out; something that may
   * change sooner (a lease expiring, a deferred run falling due) brings the next look forward, but
   * never below {@code minMs}. A maximum below the minimum counts as the minimum.
   */
  static long hint(long minMs, long maxMs, long msUntilNextChange, RandomGenerator random) {
    long max = Math.max(minMs, maxMs);
    long jittered = random.nextLong(minMs, max + 1);
    return Math.max(minMs, Math.min(jittered, msUntilNextChange));
  }

  /** The sooner of two epochs' wait hints; an epoch without one has nothing to wait for. */
  static Optional<Long> sooner(Optional<Long> a, Optional<Long> b) {
    if (a.isEmpty()) {
      return b;
    }
    return Optional.of(Math.min(a.get(), b.orElse(Long.MAX_VALUE)));
  }
}
