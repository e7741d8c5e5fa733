package dev.rollcall.sql;

import io.smallrye.mutiny.Uni;
import io.smallrye.mutiny.subscription.UniEmitter;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;

/**
 * Runs one step per item, one after another: each step's {@link Uni} is subscribed once the one
 * before it succeeded, and the first failure ends the whole (the remaining steps do not run). This
 * is how statements of one transaction run in order on its connection.
 *
 * <p>A chain built in a loop ({@code u = u.chain(...)}) does the same, but its subscription, and
 * every step that completes at once, nests a few stack frames per step: a heartbeat flush of 1 000
 * beats built that way overflowed an event loop's 512 KiB stack, and the flush never answered. Here
 * a step that completes at once is followed from a loop, not from inside it, so any number of steps
 * runs in constant stack depth ({@code InOrderTest}).
 */
public final class InOrder {

  private InOrder() {}

  /** Runs {@code step} for each of {@code items} in their order; see the class comment. */
  public static <T> Uni<Void> each(List<T> items, Function<? super T, Uni<?>> step) {
    List<T> steps = List.copyOf(items);
    return Uni.createFrom().emitter(emitter -> new Runner<>(steps, step, emitter).drain());
  }

  private static final class Runner<T> {
    private final List<T> items;
    private final Function<? super T, Uni<?>> step;
    private final UniEmitter<? super Void> emitter;
    // Trampoline: whoever moves this from 0 runs steps; a step that completes while they run
    // (at once, inside its subscription) only counts here, and the loop goes on.
    private final AtomicInteger pending = new AtomicInteger();
    private int next;
    // Set when the subscriber cancels (or the whole ends): no further step starts.
    private volatile boolean over;

    Runner(List<T> items, Function<? super T, Uni<?>> step, UniEmitter<? super Void> emitter) {
      this.items = items;
      this.step = step;
      this.emitter = emitter;
      emitter.onTermination(() -> over = true);
    }

    void drain() {
      if (pending.getAndIncrement() != 0) {
        return;
      }
      do {
        if (over) {
          return;
        }
        if (next == items.size()) {
          emitter.complete(null);
          return;
        }
        Uni<?> uni;
        try {
          uni = step.apply(items.get(next++));
        } catch (RuntimeException e) {
          emitter.fail(e);
          return;
        }
        uni.subscribe().with(ignored -> drain(), emitter::fail);
      } while (pending.decrementAndGet() != 0);
    }
  }
}
