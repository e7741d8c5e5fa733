package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.vertx.core.json.JsonObject;
import java.time.Duration;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The waiting room of held claims, without a database: a claim whose nap ran out must be forgotten
 * cleanly (it used to fail the claim with a 500), and a notice that arrives between the nap's end
 * and the claim forgetting its waiter must reach another waiting claim, not be lost; a "closed"
 * notice wakes the waiting claims of the deploy whose boot epoch closed, and no one for a takeover
 * or a sweep.
 */
@Tag("unit")
class WakeupsTest {

  private final Wakeups wakeups = new Wakeups(null, null);

  @Test
  void aWaiterWhoseNapRanOutIsNotWokenAndIsForgottenCleanly() {
    Wakeups.Waiter w = wakeups.register("ns", "d1");

    assertFalse(w.await(Duration.ofMillis(20)).await().indefinitely());

    assertFalse(w.wasWoken());
    wakeups.forget(w, false);
  }

  @Test
  void aNoticeThatComesJustAfterTheNapRanOutIsPassedOnToTheNextWaiter() {
    Wakeups.Waiter first = wakeups.register("ns", "d1");
    Wakeups.Waiter second = wakeups.register("ns", "d1");
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
    Wakeups.Waiter w = wakeups.register("ns", "d1");
    wakeups.wakeOne("ns");

    assertTrue(w.await(Duration.ofSeconds(5)).await().indefinitely());
  }

  @Test
  void whomANoticeWakes() {
    assertEquals(Wakeups.Wake.ONE, wake("{\"event\":\"work\",\"namespace\":\"ns\"}"));
    assertEquals(
        Wakeups.Wake.DEPLOY,
        wake(
            "{\"event\":\"closed\",\"namespace\":\"ns\",\"kind\":\"boot\",\"deploymentId\":\"d1\"}"));
    assertEquals(
        Wakeups.Wake.NONE,
        wake(
            "{\"event\":\"closed\",\"namespace\":\"ns\",\"kind\":\"takeover\",\"deploymentId\":null}"));
    assertEquals(
        Wakeups.Wake.NONE, wake("{\"event\":\"closed\",\"namespace\":\"ns\",\"kind\":\"sweep\"}"));
    // A notice that does not say what closed wakes everyone, as before kinds were read.
    assertEquals(Wakeups.Wake.ALL, wake("{\"event\":\"closed\",\"namespace\":\"ns\"}"));
    assertEquals(
        Wakeups.Wake.ALL, wake("{\"event\":\"closed\",\"namespace\":\"ns\",\"kind\":\"boot\"}"));
  }

  @Test
  void aTakeoverClosingWakesNoOneAndABootEpochClosingWakesItsDeployOnly() {
    Wakeups.Waiter d1 = wakeups.register("ns", "d1");
    Wakeups.Waiter d2 = wakeups.register("ns", "d2");
    Wakeups.Waiter other = wakeups.register("other", "d1");

    // A graceful leave opens a takeover and closes it at once: nobody's answer can change.
    wakeups.notice(
        "{\"event\":\"closed\",\"namespace\":\"ns\",\"epochId\":9,\"kind\":\"takeover\",\"deploymentId\":null}");
    assertFalse(d1.wasWoken());
    assertFalse(d2.wasWoken());

    wakeups.notice(
        "{\"event\":\"closed\",\"namespace\":\"ns\",\"epochId\":3,\"kind\":\"boot\",\"deploymentId\":\"d1\"}");
    assertTrue(d1.wasWoken(), "the claim waiting for its deploy's pass learns it closed");
    assertFalse(d2.wasWoken(), "another deploy's claim keeps waiting");
    assertFalse(other.wasWoken(), "so does a claim of another namespace");

    // Work wakes the oldest waiting claim of the namespace, whichever its deploy.
    wakeups.notice("{\"event\":\"work\",\"namespace\":\"ns\",\"epochId\":9}");
    assertTrue(d2.wasWoken());
    wakeups.forget(d1, true);
    wakeups.forget(d2, true);
    wakeups.forget(other, false);
  }

  private static Wakeups.Wake wake(String json) {
    return Wakeups.wakeFor(new JsonObject(json));
  }
}
