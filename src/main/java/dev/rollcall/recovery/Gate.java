package dev.rollcall.recovery;

import dev.rollcall.config.RollcallConfig;
import io.smallrye.mutiny.Uni;
import jakarta.inject.Inject;
import jakarta.inject.Singleton;
import java.util.ArrayDeque;
import java.util.function.Supplier;

/**
 * At most {@code permits} pieces of work at once, the rest waiting in memory: work under way
 * ({@link #runAhead}) in arrival order first, then new work ({@link #run}) in arrival order. Each
 * transaction of a claim or a complete of one service replica passes here before it takes a pooled
 * connection (a permit per transaction, not per claim: a claim waiting for an epoch's lock or for
 * work holds none), so that however many claimers call at once, the pool keeps connections for
 * heartbeats and the database runs a bounded number of claim transactions.
 */
@Singleton
class Gate {

  private final int permits;
  private final ArrayDeque<Runnable> ahead = new ArrayDeque<>();
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

  /**
   * Runs the work once a permit is free, after the work already waiting; the permit is returned
   * when the work ends. For work that starts something new (a claim's first look).
   */
  <T> Uni<T> run(Supplier<Uni<? extends T>> work) {
    return Admission.run(work, start -> enter(start, waiting), this::release);
  }

  /**
   * Runs the work once a permit is free, before any work waiting in {@link #run}: for work that
   * carries on something under way (a claim's cut at the head of an epoch's lane, the
   * classification of a range it leased, a complete), so that what is started finishes before more
   * is started, and the ranges and lanes it holds are not held while new claims go first.
   */
  <T> Uni<T> runAhead(Supplier<Uni<? extends T>> work) {
    return Admission.run(work, start -> enter(start, ahead), this::release);
  }

  /** Takes a permit (true), or queues the start for the next permit that is returned. */
  private synchronized boolean enter(Runnable start, ArrayDeque<Runnable> queue) {
    if (running < permits) {
      running++;
      return true;
    }
    queue.add(start);
    return false;
  }

  /** Work waiting for a permit now. */
  synchronized int waiting() {
    return ahead.size() + waiting.size();
  }

  private void release() {
    Runnable next;
    synchronized (this) {
      next = ahead.isEmpty() ? waiting.poll() : ahead.poll();
      if (next == null) {
        running--;
      }
    }
    // The permit passes straight to the oldest work waiting ahead, else the oldest waiting.
    if (next != null) {
      next.run();
    }
  }
}
