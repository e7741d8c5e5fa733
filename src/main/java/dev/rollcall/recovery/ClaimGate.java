package dev.rollcall.recovery;

import dev.rollcall.concurrency.Gate;
import dev.rollcall.config.RollcallConfig;
import jakarta.enterprise.inject.Produces;
import jakarta.inject.Singleton;

/**
 * The one {@link Gate} of a service replica that every transaction of a claim or a complete passes
 * before it takes a pooled connection: {@code rollcall.claim.max-concurrent} permits, so that the
 * pool keeps connections for heartbeats however many claimers call at once, and the database runs a
 * bounded number of claim transactions.
 */
@Singleton
class ClaimGate {

  @Produces
  @Singleton
  Gate gate(RollcallConfig config) {
    int permits = config.claim().maxConcurrent();
    if (permits < 1) {
      throw new IllegalArgumentException("rollcall.claim.max-concurrent must be at least 1");
    }
    return new Gate(permits);
  }
}
