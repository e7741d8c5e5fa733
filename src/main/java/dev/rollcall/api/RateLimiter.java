package dev.rollcall.api;

import dev.rollcall.config.RollcallConfig;
import dev.rollcall.error.Problems.RateLimited;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Token buckets per instance for claims and heartbeats, so that one misbehaving client cannot
 * starve the others. Each service replica keeps its own buckets (a client talking to N replicas
 * gets up to N times the rate); it is protection, not accounting, so it needs no shared state.
 * Elapsed time comes from the monotonic clock: no lease or deadline depends on it.
 */
@ApplicationScoped
public class RateLimiter {

  private static final long IDLE_NANOS = 60_000_000_000L;

  private final RollcallConfig config;
  private final Map<String, TokenBucket> buckets = new ConcurrentHashMap<>();

  RateLimiter(RollcallConfig config) {
    this.config = config;
  }

  /** Takes a claim token for the instance, or refuses with 429. */
  public void claim(UUID instanceId) {
    take("claims", instanceId, config.rateLimit().claimsPerSecond());
  }

  /** Takes a heartbeat token for the instance, or refuses with 429. */
  public void heartbeat(UUID instanceId) {
    take("heartbeats", instanceId, config.rateLimit().heartbeatsPerSecond());
  }

  private void take(String what, UUID instanceId, int perSecond) {
    if (perSecond <= 0) {
      return;
    }
    long now = System.nanoTime();
    if (buckets.size() > 100_000) {
      buckets.values().removeIf(b -> b.idleLongerThan(IDLE_NANOS, now));
    }
    TokenBucket bucket =
        buckets.computeIfAbsent(what + ":" + instanceId, k -> new TokenBucket(perSecond, now));
    long waitMs = bucket.take(perSecond, now);
    if (waitMs > 0) {
      throw new RateLimited(what, perSecond, waitMs);
    }
  }
}
