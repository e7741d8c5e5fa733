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

  /**
   * When something that could serve a waiting claim may change: in {@code ms}. {@code announced}:
   * anything sooner is announced by a notice ({@link Wakeups}), so a held claim may nap until then
   * unless woken; otherwise it looks again at its retry hint, as an unheld claimer would.
   */
  record Hint(long ms, boolean announced) {

    /** A change expected in {@code ms}, which a notice may not announce. */
    static Hint at(long ms) {
      return new Hint(ms, false);
    }

    /** A change in {@code ms} at the latest, any sooner one announced by a notice. */
    static Hint announcedBy(long ms) {
      return new Hint(ms, true);
    }
  }

  /**
   * The sooner of two epochs' wait hints; an epoch without one has nothing to wait for. Announced
   * only when both are: a hint that is not would have its claim look again at its retry hint.
   */
  static Optional<Hint> sooner(Optional<Hint> a, Optional<Hint> b) {
    if (a.isEmpty()) {
      return b;
    }
    if (b.isEmpty()) {
      return a;
    }
    return Optional.of(
        new Hint(Math.min(a.get().ms(), b.get().ms()), a.get().announced() && b.get().announced()));
  }

  /**
   * How long a held claim naps before it looks again, unless a notice wakes it first: until the
   * change itself when it is announced (never sooner than {@code retryAfterMs}, the hint its answer
   * would carry), else {@code retryAfterMs}.
   */
  static long nap(Hint hint, long retryAfterMs) {
    return hint.announced() ? Math.max(retryAfterMs, hint.ms()) : retryAfterMs;
  }
}
