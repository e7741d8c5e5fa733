package dev.rollcall.concurrency;

import io.smallrye.mutiny.Uni;
import java.util.ArrayDeque;
import java.util.function.Supplier;

/**
 * At most {@code permits} pieces of work at once, the rest waiting in memory: work under way
 * ({@link #runAhead}) in arrival order first, then new work ({@link #run}) in arrival order. Work
 * that waits holds nothing but memory; whatever its outcome, work leaves the gate before its caller
 * hears of it, so the next work can start.
 *
 * <p>Recovery passes each transaction of a claim or a complete here before it takes a pooled
 * connection (a permit per transaction, not per claim), so that however many claimers call at once,
 * the pool keeps connections for heartbeats; and it builds {@link Lanes} from gates of one permit.
 */
public final class Gate {

  private final int permits;
  private final ArrayDeque<Runnable> ahead = new ArrayDeque<>();
  private final ArrayDeque<Runnable> waiting = new ArrayDeque<>();
  private int running;

  /** A gate that lets {@code permits} pieces of work run at once (at least one). */
  public Gate(int permits) {
    if (permits < 1) {
      throw new IllegalArgumentException("a gate needs at least 1 permit, not " + permits);
    }
    this.permits = permits;
  }

  /**
   * Runs the work once a permit is free, after the work already waiting; the permit is returned
   * when the work ends. For work that starts something new (a claim's first look).
   */
  public <T> Uni<T> run(Supplier<Uni<? extends T>> work) {
    return admit(work, waiting);
  }

  /**
   * Runs the work once a permit is free, before any work waiting in {@link #run}: for work that
   * carries on something under way (a claim's cut at the head of an epoch's lane, the
   * classification of a range it leased, a complete), so that what is started finishes before more
   * is started, and the ranges and lanes it holds are not held while new claims go first.
   */
  public <T> Uni<T> runAhead(Supplier<Uni<? extends T>> work) {
    return admit(work, ahead);
  }

  /** Work waiting for a permit now. */
  public synchronized int waiting() {
    return ahead.size() + waiting.size();
  }

  /**
   * Runs the work once a permit is free, queued in {@code queue} until then. The permit is returned
   * once the work ends, before its outcome is passed on.
   */
  private <T> Uni<T> admit(Supplier<Uni<? extends T>> work, ArrayDeque<Runnable> queue) {
    return Uni.createFrom()
        .emitter(
            emitter -> {
              Runnable start =
                  () ->
                      Uni.createFrom()
                          .<T>deferred(work)
                          .onTermination()
                          .invoke(this::release)
                          .subscribe()
                          .with(emitter::complete, emitter::fail);
              if (enter(start, queue)) {
                start.run();
              }
            });
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
