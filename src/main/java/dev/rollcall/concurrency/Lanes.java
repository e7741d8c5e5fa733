package dev.rollcall.concurrency;

import io.smallrye.mutiny.Uni;
import java.util.HashMap;
import java.util.Map;
import java.util.function.Supplier;

/**
 * One lane per key: work on a key runs one at a time, in arrival order, and work waiting for its
 * turn holds nothing but memory. A lane is a {@link Gate} of one permit, kept while work of its key
 * runs or waits. Recovery queues the claims of one service replica here for an epoch's lock, so
 * that at most one pooled connection per epoch waits on the database's row lock.
 */
public final class Lanes<K> {

  /** A key's gate and the work of that key that entered it and has not ended (guarded by Lanes). */
  private static final class Lane {
    final Gate gate = new Gate(1);
    int entered;
  }

  private final Map<K, Lane> lanes = new HashMap<>();

  /** Runs the work when every earlier work on this key has finished. */
  public <T> Uni<T> run(K key, Supplier<Uni<? extends T>> work) {
    return Uni.createFrom()
        .deferred(
            () ->
                enter(key)
                    .gate
                    .<T>run(
                        // The lane is left when the work ends, inside its turn (so before the
                        // next work of the key starts), whether or not anyone still listens.
                        () ->
                            Uni.createFrom()
                                .<T>deferred(work)
                                .onTermination()
                                .invoke(() -> leave(key))));
  }

  /** True when no work of this key is running or waiting (a glance: it may change at once). */
  public synchronized boolean idle(K key) {
    return !lanes.containsKey(key);
  }

  /** Work of this key waiting behind the work running now (a glance: it may change at once). */
  public int queued(K key) {
    Lane lane;
    synchronized (this) {
      lane = lanes.get(key);
    }
    return lane == null ? 0 : lane.gate.waiting();
  }

  /** The key's lane, opened when no work of the key runs or waits, with one more work in it. */
  private synchronized Lane enter(K key) {
    Lane lane = lanes.computeIfAbsent(key, k -> new Lane());
    lane.entered++;
    return lane;
  }

  /** One work of the key ended; the last one closes the lane. */
  private synchronized void leave(K key) {
    Lane lane = lanes.get(key);
    if (--lane.entered == 0) {
      lanes.remove(key);
    }
  }
}
