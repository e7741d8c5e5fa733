package dev.rollcall.sql;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.smallrye.mutiny.Uni;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** Steps in order, in constant stack depth, stopping at the first failure. */
@Tag("unit")
class InOrderTest {

  private static final List<Integer> MANY = IntStream.range(0, 100_000).boxed().toList();

  @Test
  void manyStepsThatCompleteAtOnceDoNotOverflowTheStack() throws Exception {
    List<Integer> seen = new ArrayList<>();

    InOrder.each(MANY, i -> Uni.createFrom().voidItem().invoke(() -> seen.add(i)))
        .subscribeAsCompletionStage()
        .get(30, TimeUnit.SECONDS);

    assertEquals(MANY, seen);
  }

  /** The same steps chained in a loop, as the flush of heartbeats did: the stack overflows. */
  @Test
  void theSameStepsChainedInALoopOverflowTheStack() {
    Uni<Void> chained = Uni.createFrom().voidItem();
    for (int i = 0; i < MANY.size(); i++) {
      chained = chained.chain(() -> Uni.createFrom().voidItem());
    }
    Uni<Void> loop = chained;

    assertThrows(
        StackOverflowError.class,
        () -> loop.subscribeAsCompletionStage().get(30, TimeUnit.SECONDS));
  }

  @Test
  void stepsThatCompleteLaterRunOneAfterAnotherInOrder() throws Exception {
    List<String> events = java.util.Collections.synchronizedList(new ArrayList<>());
    List<Integer> items = List.of(1, 2, 3, 4, 5);

    InOrder.each(
            items,
            i ->
                Uni.createFrom()
                    .voidItem()
                    .invoke(() -> events.add("start " + i))
                    .onItem()
                    .delayIt()
                    .by(Duration.ofMillis(5))
                    .invoke(() -> events.add("end " + i)))
        .subscribeAsCompletionStage()
        .get(30, TimeUnit.SECONDS);

    List<String> expected = new ArrayList<>();
    items.forEach(i -> expected.addAll(List.of("start " + i, "end " + i)));
    assertEquals(expected, events);
  }

  @Test
  void theFirstFailureEndsItAndTheRestDoNotRun() {
    List<Integer> ran = new ArrayList<>();

    ExecutionException e =
        assertThrows(
            ExecutionException.class,
            () ->
                InOrder.each(
                        List.of(1, 2, 3, 4),
                        i -> {
                          ran.add(i);
                          return i == 2
                              ? Uni.createFrom().failure(new IllegalStateException("step 2"))
                              : Uni.createFrom().voidItem();
                        })
                    .subscribeAsCompletionStage()
                    .get(30, TimeUnit.SECONDS));

    assertInstanceOf(IllegalStateException.class, e.getCause());
    assertEquals(List.of(1, 2), ran);
  }

  @Test
  void aStepThatThrowsFailsItToo() {
    ExecutionException e =
        assertThrows(
            ExecutionException.class,
            () ->
                InOrder.each(
                        List.of(1),
                        i -> {
                          throw new IllegalArgumentException("no step");
                        })
                    .subscribeAsCompletionStage()
                    .get(30, TimeUnit.SECONDS));

    assertInstanceOf(IllegalArgumentException.class, e.getCause());
  }

  @Test
  void noItemsCompletesAtOnce() throws Exception {
    InOrder.each(List.of(), i -> Uni.createFrom().voidItem())
        .subscribeAsCompletionStage()
        .get(1, TimeUnit.SECONDS);
  }
}
