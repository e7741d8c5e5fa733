package dev.rollcall.registry;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.registry.Coalescer.Outcome;
import io.smallrye.mutiny.Uni;
import io.smallrye.mutiny.operators.AbstractUni;
import io.smallrye.mutiny.subscription.UniEmitter;
import io.smallrye.mutiny.subscription.UniSubscriber;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** Group commit: which items go together, and who gets which answer. */
@Tag("unit")
class CoalescerTest {

  /** Flushes the test completes by hand: each records its items and waits. */
  private static final class Flushes {
    final List<List<Integer>> batches = new ArrayList<>();
    final List<UniEmitter<? super List<Outcome<String>>>> open = new ArrayList<>();

    Uni<List<Outcome<String>>> flush(List<Integer> items) {
      return Uni.createFrom()
          .emitter(
              e -> {
                batches.add(items);
                open.add(e);
              });
    }

    /** Completes the k-th flush, answering each item with "item:k". */
    void answer(int k) {
      List<Outcome<String>> answers = new ArrayList<>();
      for (int item : batches.get(k)) {
        answers.add(
            item < 0
                ? Outcome.failed(new IllegalStateException("gone " + item))
                : Outcome.of(item + ":" + k));
      }
      open.get(k).complete(answers);
    }
  }

  private static CompletableFuture<String> submit(Coalescer<Integer, String> c, int item) {
    return c.submit(item).subscribeAsCompletionStage();
  }

  @Test
  void anItemAloneIsFlushedAtOnceAndAlone() throws Exception {
    Flushes f = new Flushes();
    Coalescer<Integer, String> c = new Coalescer<>(1, 10, f::flush);

    CompletableFuture<String> one = submit(c, 1);

    assertEquals(List.of(List.of(1)), f.batches);
    f.answer(0);
    assertEquals("1:0", one.get());
  }

  @Test
  void itemsThatArriveWhileEveryFlushRunsGoTogetherInTheNext() throws Exception {
    Flushes f = new Flushes();
    Coalescer<Integer, String> c = new Coalescer<>(2, 10, f::flush);
    CompletableFuture<String> first = submit(c, 1);
    CompletableFuture<String> second = submit(c, 2);
    List<CompletableFuture<String>> later = new ArrayList<>();
    for (int i = 3; i <= 7; i++) {
      later.add(submit(c, i));
    }

    assertEquals(List.of(List.of(1), List.of(2)), f.batches, "two flushes at most");
    assertEquals(5, c.waiting());

    f.answer(1);
    assertEquals("2:1", second.get());
    assertEquals(List.of(3, 4, 5, 6, 7), f.batches.get(2));
    assertEquals(0, c.waiting());
    f.answer(2);
    for (int i = 0; i < later.size(); i++) {
      assertEquals((i + 3) + ":2", later.get(i).get());
    }
    f.answer(0);
    assertEquals("1:0", first.get());
    assertEquals(3, f.batches.size());
  }

  @Test
  void aFlushTakesAtMostMaxBatchItems() {
    Flushes f = new Flushes();
    Coalescer<Integer, String> c = new Coalescer<>(1, 3, f::flush);
    for (int i = 0; i <= 7; i++) {
      submit(c, i);
    }

    f.answer(0);
    f.answer(1);
    f.answer(2);

    assertEquals(List.of(List.of(0), List.of(1, 2, 3), List.of(4, 5, 6), List.of(7)), f.batches);
  }

  @Test
  void anItemThatFailsFailsAlone() throws Exception {
    Flushes f = new Flushes();
    Coalescer<Integer, String> c = new Coalescer<>(1, 10, f::flush);
    CompletableFuture<String> holder = submit(c, 0);
    CompletableFuture<String> ok = submit(c, 1);
    CompletableFuture<String> gone = submit(c, -1);
    f.answer(0);
    f.answer(1);

    assertEquals("0:0", holder.get());
    assertEquals("1:1", ok.get());
    ExecutionException e = assertThrows(ExecutionException.class, gone::get);
    assertEquals("gone -1", e.getCause().getMessage());
  }

  @Test
  void aFlushThatFailsFailsEachOfItsItemsAndTheNextFlushStillRuns() throws Exception {
    Flushes f = new Flushes();
    Coalescer<Integer, String> c = new Coalescer<>(1, 10, f::flush);
    CompletableFuture<String> a = submit(c, 1);
    CompletableFuture<String> b = submit(c, 2);
    CompletableFuture<String> d = submit(c, 3);
    f.open.get(0).fail(new IllegalStateException("database down"));
    f.open.get(1).fail(new IllegalStateException("database down"));
    CompletableFuture<String> after = submit(c, 4);
    f.answer(2);

    for (CompletableFuture<String> x : List.of(a, b, d)) {
      ExecutionException e = assertThrows(ExecutionException.class, x::get);
      assertInstanceOf(IllegalStateException.class, e.getCause());
    }
    assertEquals("4:2", after.get());
  }

  @Test
  void aFlushFunctionThatThrowsFailsItsItemsAndFreesItsSlot() throws Exception {
    List<List<Integer>> seen = new ArrayList<>();
    Coalescer<Integer, String> c =
        new Coalescer<>(
            1,
            10,
            items -> {
              seen.add(items);
              if (items.contains(1)) {
                throw new IllegalArgumentException("bad batch");
              }
              return Uni.createFrom().item(items.stream().map(i -> Outcome.of("ok " + i)).toList());
            });

    ExecutionException e = assertThrows(ExecutionException.class, () -> submit(c, 1).get());
    assertInstanceOf(IllegalArgumentException.class, e.getCause());
    assertEquals("ok 2", submit(c, 2).get());
    assertTrue(seen.size() == 2);
  }

  /**
   * A flush whose subscription overflows the stack (as a flush of 1 000 heartbeats chained in a
   * loop did on an event loop) fails its items and frees its slot: the next flush runs. Before, the
   * error escaped to the event loop, the slot was never freed, and no heartbeat was answered again.
   */
  @Test
  void aFlushWhoseSubscriptionOverflowsTheStackFailsItsItemsAndFreesItsSlot() throws Exception {
    Coalescer<Integer, String> c =
        new Coalescer<>(
            1,
            10,
            items ->
                items.contains(1)
                    ? new AbstractUni<List<Outcome<String>>>() {
                      @Override
                      public void subscribe(UniSubscriber<? super List<Outcome<String>>> s) {
                        throw new StackOverflowError("deep");
                      }
                    }
                    : Uni.createFrom()
                        .item(items.stream().map(i -> Outcome.of("ok " + i)).toList()));

    ExecutionException e =
        assertThrows(ExecutionException.class, () -> submit(c, 1).get(5, TimeUnit.SECONDS));
    assertInstanceOf(StackOverflowError.class, e.getCause());
    assertEquals("ok 2", submit(c, 2).get(5, TimeUnit.SECONDS));
  }

  @Test
  void limitsAreAtLeastOne() {
    assertThrows(
        IllegalArgumentException.class, () -> new Coalescer<Integer, String>(0, 1, x -> null));
    assertThrows(
        IllegalArgumentException.class, () -> new Coalescer<Integer, String>(1, 0, x -> null));
  }
}
