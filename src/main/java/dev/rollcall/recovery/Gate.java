package dev.rollcall.recovery;

import dev.rollcall.config.RollcallConfig;
import io.smallrye.mutiny.Uni;
import jakarta.inject.Inject;
import jakarta.inject.Singleton;
import java.util.ArrayDeque;
import java.util.function.Supplier;

/**
 * At most {@code permits} pieces of work at once, the rest waiting in arrival order and holding
 * nothing but memory. Each transaction of a claim or a complete of one service replica passes here
 * before it takes a pooled connection (a permit per transaction, not per claim: a claim waiting for
 * an epoch's lock or for work holds none), so that however many claimers call at once, the pool
 * keeps connections for heartbeats and the database runs a bounded number of claim transactions.
 */
@Singleton
class Gate {

  private final int permits;
  private final ArrayDeque<Runnable> waiting = new ArrayDeque<>();
  private int running;

  @Inject
  Gate(RollcallConfig config) {
    this(config.claim().maxConcurrent());
  }

  Gate(int permits) {
    if (permits < 1) {
      throw new IllegalArgumentException("rollcall.claim.max-concurrent must be at least 1");
    }
    this.permits = permits;
  }

  /** Runs the work once a permit is free; the permit is returned when the work ends. */
  <T> Uni<T> run(Supplier<Uni<? extends T>> work) {
    return Admission.run(work, this::enter, this::release);
  }

  /** Takes a permit (true), or queues the start for the next permit that is returned. */
  private synchronized boolean enter(Runnable start) {
    if (running < permits) {
      running++;
      return true;
    }
    waiting.add(start);
    return false;
  }

  /** Work waiting for a permit now. */
  synchronized int waiting() {
    return waiting.size();
  }

  private void release() {
    Runnable next;
    synchronized (this) {
      next = waiting.poll();
      if (next == null) {
        running--;
      }
    }
    // The permit passes straight to the oldest waiting work.
    if (next != null) {
      next.run();
    }
  }
}
