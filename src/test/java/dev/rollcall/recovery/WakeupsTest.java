package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
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

  private final Wakeups wakeups = new Wakeups(null, null, null);

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
        Wakeups.Wake.ONE,
        wake(
            "{\"event\":\"work\",\"namespace\":\"ns\",\"kind\":\"takeover\",\"deploymentId\":null}"));
    // A boot epoch's batch: only its own deploy's claims can take it.
    assertEquals(
        Wakeups.Wake.ONE_OF_DEPLOY,
        wake(
            "{\"event\":\"work\",\"namespace\":\"ns\",\"kind\":\"boot\",\"deploymentId\":\"d1\"}"));
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

  @Test
  void aHeldClaimThatEndsWithoutAnsweringLeavesNoWaiterBehind() {
    Wakeups.Hold hold = wakeups.hold("ns", "d1");
    assertNotNull(hold.look());
    assertEquals(1, wakeups.waiting("ns"));

    // Its caller hung up while it napped.
    hold.abandoned();

    assertEquals(0, wakeups.waiting("ns"), "no waiter is left to take the next notice");
    assertNull(hold.look(), "an abandoned claim registers no waiter for another look");
    assertEquals(0, wakeups.waiting("ns"));
  }

  /** Two held claims of d1, each looking: the older first. */
  private record TwoHeld(
      Wakeups.Hold older,
      Wakeups.Waiter olderWaiter,
      Wakeups.Hold next,
      Wakeups.Waiter nextWaiter) {}

  /** Two held claims of d1; a notice wakes the older, which then looks again. */
  private TwoHeld olderWokenAndLookingAgain() {
    Wakeups.Hold older = wakeups.hold("ns", "d1");
    Wakeups.Waiter olderWaiter = older.look();
    Wakeups.Hold next = wakeups.hold("ns", "d1");
    TwoHeld two = new TwoHeld(older, olderWaiter, next, next.look());
    wakeups.wakeOne("ns");
    assertTrue(olderWaiter.wasWoken());
    assertFalse(two.nextWaiter().wasWoken());
    older.napped(true);
    assertNotNull(older.look());
    return two;
  }

  @Test
  void aWokenClaimThatFailsPassesTheWakeOnOnce() {
    // The notice wakes the oldest: the claim of an instance that has just died.
    TwoHeld two = olderWokenAndLookingAgain();
    Wakeups.Hold dying = two.older();
    Wakeups.Hold live = two.next();
    Wakeups.Waiter second = two.nextWaiter();
    // Its next look fails (the instance is dead: 410); the wake goes to the claim still waiting.
    dying.abandoned();
    assertTrue(second.wasWoken(), "the wake went on to the live claim");

    // Ending twice, or failing after answering, passes nothing more on.
    Wakeups.Hold third = wakeups.hold("ns", "d1");
    Wakeups.Waiter waiting = third.look();
    dying.abandoned();
    live.napped(true);
    live.answered(false, false);
    live.abandoned();
    assertFalse(waiting.wasWoken(), "a wake used by a claim that found nothing is not passed on");
    third.abandoned();
    assertEquals(0, wakeups.waiting("ns"));
  }

  @Test
  void aWokenClaimThatGotABatchWakesTheNextOne() {
    TwoHeld two = olderWokenAndLookingAgain();
    Wakeups.Hold next = two.next();
    Wakeups.Waiter second = two.nextWaiter();

    two.older().answered(true, false);

    assertTrue(second.wasWoken(), "more may be left for the next waiting claim");
    next.napped(true);
    next.answered(false, false);
    assertEquals(0, wakeups.waiting("ns"));
  }

  @Test
  void workOfADeploysPassWakesAClaimOfThatDeployEvenIfAnotherWaitedLonger() {
    Wakeups.Waiter d1 = wakeups.register("ns", "d1");
    Wakeups.Waiter d2 = wakeups.register("ns", "d2");

    wakeups.notice(
        "{\"event\":\"work\",\"namespace\":\"ns\",\"epochId\":3,\"kind\":\"boot\",\"deploymentId\":\"d3\"}");
    assertFalse(d1.wasWoken() || d2.wasWoken(), "no claim of d3 waits: no one could take it");
    wakeups.notice(
        "{\"event\":\"work\",\"namespace\":\"ns\",\"epochId\":3,\"kind\":\"boot\",\"deploymentId\":\"d2\"}");
    assertTrue(d2.wasWoken(), "the claim that can take d2's batch");
    assertFalse(d1.wasWoken(), "d1's claim could not take it, though it waited longer");

    // Shared work (a takeover's batch) wakes the oldest, whichever its deploy.
    wakeups.notice(
        "{\"event\":\"work\",\"namespace\":\"ns\",\"epochId\":9,\"kind\":\"takeover\",\"deploymentId\":null}");
    assertTrue(d1.wasWoken());
    wakeups.forget(d1, true);
    wakeups.forget(d2, true);
  }

  @Test
  void aWakePassedOnGoesToTheSameDeployFirstAndABootBatchsOnlyThere() {
    Wakeups.Hold d1 = wakeups.hold("ns", "d1");
    Wakeups.Hold d2 = wakeups.hold("ns", "d2");
    Wakeups.Hold d2Later = wakeups.hold("ns", "d2");
    d1.look();
    Wakeups.Waiter d2Waiter = d2.look();
    Wakeups.Waiter d2LaterWaiter = d2Later.look();

    wakeups.notice(
        "{\"event\":\"work\",\"namespace\":\"ns\",\"epochId\":3,\"kind\":\"boot\",\"deploymentId\":\"d2\"}");
    assertTrue(d2Waiter.wasWoken());
    d2.napped(true);
    Wakeups.Waiter again = d2.look();
    // It fails: the wake goes to the other claim of d2, not to d1's, which waited longer.
    d2.abandoned();
    assertTrue(d2LaterWaiter.wasWoken());
    assertFalse(again.wasWoken());

    // d2's later claim takes a boot batch: more of d2's pass may be left, and only d2 can take it.
    d2Later.napped(true);
    d2Later.look();
    d2Later.answered(true, true);
    assertEquals(1, wakeups.waiting("ns"), "d1's claim still waits");

    // With no claim of its deploy left, a wake passed on goes to any deploy's.
    Wakeups.Hold d3 = wakeups.hold("ns", "d3");
    Wakeups.Waiter d3Waiter = d3.look();
    wakeups.wakeOne("ns", "d3");
    assertTrue(d3Waiter.wasWoken());
    d3.napped(true);
    d3.look();
    d3.abandoned();
    assertEquals(0, wakeups.waiting("ns"), "d1's claim was woken by d3's unused wake");
    d1.abandoned();
  }

  private static Wakeups.Wake wake(String json) {
    return Wakeups.wakeFor(new JsonObject(json));
  }
}
