package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The waiting room of held claims, without a database: a claim whose nap ran out must be forgotten
 * cleanly (it used to fail the claim with a 500), and a notice that arrives between the nap's end
 * and the claim forgetting its waiter must reach another waiting claim, not be lost.
 */
@Tag("unit")
class WakeupsTest {

  private final Wakeups wakeups = new Wakeups(null, null);

  @Test
  void aWaiterWhoseNapRanOutIsNotWokenAndIsForgottenCleanly() {
    Wakeups.Waiter w = wakeups.register("ns");

    assertFalse(w.await(Duration.ofMillis(20)).await().indefinitely());

    assertFalse(w.wasWoken());
    wakeups.forget(w, false);
  }

  @Test
  void aNoticeThatComesJustAfterTheNapRanOutIsPassedOnToTheNextWaiter() {
    Wakeups.Waiter first = wakeups.register("ns");
    Wakeups.Waiter second = wakeups.register("ns");
    assertFalse(first.await(Duration.ofMillis(20)).await().indefinitely());

    // The notice wakes the oldest waiter, whose claim has stopped waiting but not yet forgotten it.
    wakeups.wakeOne("ns");
    assertTrue(first.wasWoken());
    wakeups.forget(first, false);

    assertTrue(second.wasWoken(), "the notice went on to the claim still waiting");
    assertTrue(second.await(Duration.ofSeconds(5)).await().indefinitely());
  }

  @Test
  void aWaiterWokenWhileNappingAwakesAtOnce() {
    Wakeups.Waiter w = wakeups.register("ns");
    wakeups.wakeOne("ns");

    assertTrue(w.await(Duration.ofSeconds(5)).await().indefinitely());
  }
}
