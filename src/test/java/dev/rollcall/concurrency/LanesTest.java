package dev.rollcall.concurrency;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.smallrye.mutiny.Uni;
import io.smallrye.mutiny.subscription.UniEmitter;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** One at a time per key, in arrival order; keys do not wait for each other. */
@Tag("unit")
class LanesTest {

  private final Lanes<Integer> lanes = new Lanes<>();
  private final List<String> started = new ArrayList<>();
  private final List<UniEmitter<? super String>> open = new ArrayList<>();

  private CompletableFuture<String> submit(int key, String name) {
    return lanes
        .<String>run(
            key,
            () ->
                Uni.createFrom()
                    .emitter(
                        e -> {
                          started.add(name);
                          open.add(e);
                        }))
        .subscribeAsCompletionStage();
  }

  @Test
  void workOfOneKeyRunsOneAtATimeInArrivalOrder() throws Exception {
    CompletableFuture<String> a = submit(1, "a");
    submit(1, "b");
    submit(1, "c");

    assertEquals(List.of("a"), started);
    assertEquals(2, lanes.queued(1));
    open.get(0).complete("a done");
    assertEquals("a done", a.get());
    assertEquals(List.of("a", "b"), started);
    assertEquals(1, lanes.queued(1));
    open.get(1).complete("b done");
    assertEquals(List.of("a", "b", "c"), started);
    assertEquals(0, lanes.queued(1));
  }

  @Test
  void keysDoNotWaitForEachOther() {
    submit(1, "a");
    submit(2, "b");

    assertEquals(List.of("a", "b"), started);
    assertEquals(0, lanes.queued(1));
    assertEquals(0, lanes.queued(2));
  }

  @Test
  void aLaneIsIdleOnlyWhenNothingOfItsKeyRunsOrWaits() {
    assertTrue(lanes.idle(1));
    submit(1, "a");
    submit(1, "b");
    assertFalse(lanes.idle(1));
    assertTrue(lanes.idle(2));

    open.get(0).complete("a done");
    assertFalse(lanes.idle(1), "b runs now");
    open.get(1).complete("b done");
    assertTrue(lanes.idle(1));
    assertEquals(0, lanes.queued(1));
  }

  @Test
  void workThatFailsLetsTheNextOfItsKeyRun() {
    CompletableFuture<String> a = submit(1, "a");
    CompletableFuture<String> thrown =
        lanes
            .<String>run(
                1,
                () -> {
                  throw new IllegalStateException("no connection");
                })
            .subscribeAsCompletionStage();
    submit(1, "c");

    open.get(0).fail(new IllegalStateException("database down"));

    assertThrows(ExecutionException.class, a::get);
    assertThrows(ExecutionException.class, thrown::get);
    assertEquals(List.of("a", "c"), started, "both failures let the next one run");
    open.get(1).complete("c done");
    assertTrue(lanes.idle(1));
  }
}
