package dev.rollcall.registry;

import io.smallrye.mutiny.Uni;
import io.smallrye.mutiny.subscription.UniEmitter;
import io.vertx.core.Context;
import io.vertx.core.Vertx;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;

/**
 * Group commit for the requests of one service replica. An item submitted while fewer than {@code
 * maxFlushes} flushes run is flushed at once, with whatever else is waiting; items submitted while
 * every flush runs wait, and go together in the next flush that starts (at most {@code maxBatch}
 * each). Under light load every item is flushed alone and waits for nothing; under heavy load the
 * flushes grow instead of multiplying, so the database sees a bounded number of transactions
 * whatever the request rate.
 *
 * <p>The flush answers each item in order: a result, or the failure of that item alone. A flush
 * that fails as a whole fails each of its items. Each item's answer is delivered on the Vert.x
 * context it was submitted on.
 */
final class Coalescer<I, O> {

  /** What a flush did for one item: {@code value}, or {@code failure} when it failed. */
  record Outcome<O>(O value, Throwable failure) {
    static <O> Outcome<O> of(O value) {
      return new Outcome<>(value, null);
    }

    static <O> Outcome<O> failed(Throwable failure) {
      return new Outcome<>(null, failure);
    }
  }

  private record Waiting<I, O>(I item, UniEmitter<? super O> emitter, Context context) {}

  private final int maxFlushes;
  private final int maxBatch;
  private final Function<List<I>, Uni<List<Outcome<O>>>> flush;
  private final ArrayDeque<Waiting<I, O>> waiting = new ArrayDeque<>();
  private int running;

  /**
   * @param flush answers a batch of items, one outcome per item in their order
   */
  Coalescer(int maxFlushes, int maxBatch, Function<List<I>, Uni<List<Outcome<O>>>> flush) {
    if (maxFlushes < 1 || maxBatch < 1) {
      throw new IllegalArgumentException("maxFlushes and maxBatch are at least 1");
    }
    this.maxFlushes = maxFlushes;
    this.maxBatch = maxBatch;
    this.flush = flush;
  }

  /** The item's answer, once the flush that took it is done. */
  Uni<O> submit(I item) {
    return Uni.createFrom()
        .emitter(
            emitter -> {
              List<Waiting<I, O>> batch;
              synchronized (this) {
                waiting.add(new Waiting<>(item, emitter, Vertx.currentContext()));
                batch = next();
              }
              if (batch != null) {
                run(batch);
              }
            });
  }

  /** Items waiting for a flush now (for metrics and tests). */
  synchronized int waiting() {
    return waiting.size();
  }

  /** The next batch to flush, if one may start now; counts it as running. Under the monitor. */
  private List<Waiting<I, O>> next() {
    if (running >= maxFlushes || waiting.isEmpty()) {
      return null;
    }
    running++;
    List<Waiting<I, O>> batch = new ArrayList<>(Math.min(waiting.size(), maxBatch));
    while (batch.size() < maxBatch && !waiting.isEmpty()) {
      batch.add(waiting.poll());
    }
    return batch;
  }

  private void run(List<Waiting<I, O>> batch) {
    // Each flush ends once: with its outcomes, with its failure, or with what its function or the
    // subscription to it threw (a StackOverflowError included). Without that last case the flush
    // would keep its slot for ever, and once every slot was lost no heartbeat would be answered.
    java.util.concurrent.atomic.AtomicBoolean ended =
        new java.util.concurrent.atomic.AtomicBoolean();
    java.util.function.Consumer<Throwable> fail =
        failure -> {
          if (!ended.compareAndSet(false, true)) {
            return;
          }
          finished();
          for (Waiting<I, O> w : batch) {
            deliver(w, Outcome.failed(failure));
          }
        };
    try {
      flush
          .apply(batch.stream().map(Waiting::item).toList())
          .subscribe()
          .with(
              outcomes -> {
                if (!ended.compareAndSet(false, true)) {
                  return;
                }
                finished();
                for (int k = 0; k < batch.size(); k++) {
                  Outcome<O> outcome =
                      k < outcomes.size()
                          ? outcomes.get(k)
                          : Outcome.failed(new IllegalStateException("the flush gave no answer"));
                  deliver(batch.get(k), outcome);
                }
              },
              fail);
    } catch (RuntimeException | StackOverflowError e) {
      fail.accept(e);
    }
  }

  /** A flush ended: the next one starts with what waited meanwhile. */
  private void finished() {
    List<Waiting<I, O>> batch;
    synchronized (this) {
      running--;
      batch = next();
    }
    if (batch != null) {
      run(batch);
    }
  }

  private static <I, O> void deliver(Waiting<I, O> w, Outcome<O> outcome) {
    Runnable answer =
        () -> {
          if (outcome.failure() != null) {
            w.emitter().fail(outcome.failure());
          } else {
            w.emitter().complete(outcome.value());
          }
        };
    if (w.context() == null) {
      answer.run();
    } else {
      w.context().runOnContext(ignored -> answer.run());
    }
  }
}
