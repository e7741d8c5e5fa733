package dev.rollcall.concurrency;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.smallrye.mutiny.Uni;
import io.smallrye.mutiny.subscription.UniEmitter;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** At most so many at once, the rest in arrival order; an ending, however it ends, frees one. */
@Tag("unit")
class GateTest {

  private final List<String> started = new ArrayList<>();
  private final List<UniEmitter<? super String>> open = new ArrayList<>();

  private CompletableFuture<String> submit(Gate gate, String name) {
    return gate.<String>run(
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
  void atMostThePermitsRunAndTheRestStartInArrivalOrder() throws Exception {
    Gate gate = new Gate(2);
    CompletableFuture<String> a = submit(gate, "a");
    submit(gate, "b");
    submit(gate, "c");
    submit(gate, "d");

    assertEquals(List.of("a", "b"), started);
    assertEquals(2, gate.waiting());
    open.get(0).complete("a done");
    assertEquals("a done", a.get());
    assertEquals(List.of("a", "b", "c"), started);
    open.get(1).complete("b done");
    assertEquals(List.of("a", "b", "c", "d"), started);
    assertEquals(0, gate.waiting());
  }

  @Test
  void workRunAheadStartsBeforeWorkWaitingInArrivalOrder() throws Exception {
    Gate gate = new Gate(1);
    submit(gate, "a");
    submit(gate, "new-1");
    submit(gate, "new-2");
    gate.<String>runAhead(
            () ->
                Uni.createFrom()
                    .emitter(
                        e -> {
                          started.add("under-way");
                          open.add(e);
                        }))
        .subscribeAsCompletionStage();

    assertEquals(3, gate.waiting());
    open.get(0).complete("a done");
    assertEquals(List.of("a", "under-way"), started);
    open.get(1).complete("under-way done");
    assertEquals(List.of("a", "under-way", "new-1"), started);
  }

  @Test
  void workThatFailsReturnsItsPermit() throws Exception {
    Gate gate = new Gate(1);
    CompletableFuture<String> a = submit(gate, "a");
    CompletableFuture<String> thrown =
        gate.<String>run(
                () -> {
                  throw new IllegalStateException("no connection");
                })
            .subscribeAsCompletionStage();
    submit(gate, "c");

    open.get(0).fail(new IllegalStateException("database down"));

    assertThrows(ExecutionException.class, a::get);
    assertThrows(ExecutionException.class, thrown::get);
    assertEquals(List.of("a", "c"), started, "both failures returned their permits");
    open.get(1).complete("c done");
    submit(gate, "e");
    assertEquals(List.of("a", "c", "e"), started, "c ended: e starts at once");
  }

  @Test
  void aGateHasAPermit() {
    assertThrows(IllegalArgumentException.class, () -> new Gate(0));
  }
}
