package dev.rollcall.api;

/**
 * A token bucket holding up to two seconds' worth of tokens, starting full. Time is given in
 * nanoseconds of a monotonic clock, so the rule is a plain function of the calls made.
 */
final class TokenBucket {

  private double tokens;
  private long touched;

  TokenBucket(int perSecond, long nowNanos) {
    this.tokens = 2.0 * perSecond;
    this.touched = nowNanos;
  }

  /** Zero when a token was taken, else how many milliseconds until one is there. */
  synchronized long take(int perSecond, long nowNanos) {
    tokens = Math.min(2.0 * perSecond, tokens + (nowNanos - touched) / 1e9 * perSecond);
    touched = nowNanos;
    if (tokens >= 1) {
      tokens -= 1;
      return 0;
    }
    return (long) Math.ceil((1 - tokens) / perSecond * 1000);
  }

  /** Untouched for longer than {@code idleNanos}: safe to forget. */
  synchronized boolean idleLongerThan(long idleNanos, long nowNanos) {
    return nowNanos - touched > idleNanos;
  }
}
