package dev.rollcall.recovery;

import io.smallrye.mutiny.Uni;
import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.Map;
import java.util.function.Supplier;

/**
 * One lane per key: work on a key runs one at a time, in arrival order, and work waiting for its
 * turn holds nothing but memory. Claims of one service replica queue here for an epoch's lock, so
 * that at most one pooled connection per epoch waits on the database's row lock.
 */
final class Lanes {

  private final Map<Long, ArrayDeque<Runnable>> waiting = new HashMap<>();

  /** Runs the work when every earlier work on this key has finished. */
  <T> Uni<T> run(long key, Supplier<Uni<? extends T>> work) {
    return Admission.run(work, start -> enter(key, start), () -> release(key));
  }

  /** True when no work of this key is running or waiting (a glance: it may change at once). */
  synchronized boolean idle(long key) {
    return !waiting.containsKey(key);
  }

  /** Work of this key waiting behind the work running now (a glance: it may change at once). */
  synchronized int queued(long key) {
    ArrayDeque<Runnable> queue = waiting.get(key);
    return queue == null ? 0 : queue.size();
  }

  /** Opens the key's lane (true), or queues the start behind the work already in it. */
  private synchronized boolean enter(long key, Runnable start) {
    ArrayDeque<Runnable> queue = waiting.get(key);
    if (queue == null) {
      waiting.put(key, new ArrayDeque<>());
      return true;
    }
    queue.add(start);
    return false;
  }

  private void release(long key) {
    Runnable next;
    synchronized (this) {
      ArrayDeque<Runnable> queue = waiting.get(key);
      next = queue.poll();
      if (next == null) {
        waiting.remove(key);
      }
    }
    if (next != null) {
      next.run();
    }
  }
}
