package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashSet;
import java.util.Optional;
import java.util.Set;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The {@code retryAfterMs} of a wait answer: jittered, brought forward, never below the minimum.
 */
@Tag("unit")
class WaitHintsTest {

  private final SplittableRandom random = new SplittableRandom(14);

  @Test
  void withNothingDueSoonerTheHintIsJitteredAcrossTheWholeRange() {
    Set<Long> seen = new HashSet<>();
    for (int i = 0; i < 2_000; i++) {
      long hint = WaitHints.hint(250, 260, Long.MAX_VALUE, random);
      assertTrue(hint >= 250 && hint <= 260, "within [min, max]: " + hint);
      seen.add(hint);
    }
    assertEquals(11, seen.size(), "every value of the range is drawn, both ends included");
  }

  @Test
  void somethingChangingSoonerBringsTheNextLookForward() {
    Set<Long> seen = new HashSet<>();
    for (int i = 0; i < 1_000; i++) {
      long hint = WaitHints.hint(250, 2_000, 400, random);
      assertTrue(hint >= 250 && hint <= 400, "jittered, but no later than the change: " + hint);
      seen.add(hint);
    }
    assertTrue(seen.contains(400L), "draws past the change look at the change");
    assertTrue(seen.size() > 1, "draws before the change keep their jitter");
  }

  @Test
  void theHintIsNeverBelowTheMinimumEvenWhenSomethingIsAlreadyDue() {
    assertEquals(250, WaitHints.hint(250, 2_000, 0, random));
    assertEquals(250, WaitHints.hint(250, 2_000, 100, random));
  }

  @Test
  void aMaximumBelowTheMinimumCountsAsTheMinimum() {
    assertEquals(500, WaitHints.hint(500, 100, Long.MAX_VALUE, random));
  }

  @Test
  void theSoonerOfTwoEpochsWaitsWinsAndAnEpochWithoutOneAddsNothing() {
    Optional<WaitHints.Hint> soon = Optional.of(WaitHints.Hint.at(300));
    Optional<WaitHints.Hint> late = Optional.of(WaitHints.Hint.at(900));
    assertEquals(soon, WaitHints.sooner(soon, late));
    assertEquals(soon, WaitHints.sooner(late, soon));
    assertEquals(late, WaitHints.sooner(Optional.empty(), late));
    assertEquals(late, WaitHints.sooner(late, Optional.empty()));
    assertEquals(Optional.empty(), WaitHints.sooner(Optional.empty(), Optional.empty()));
  }

  @Test
  void aHintIsAnnouncedOnlyWhenBothAre() {
    WaitHints.Hint announced = WaitHints.Hint.announcedBy(30_000);
    WaitHints.Hint polled = WaitHints.Hint.at(5_000);
    assertEquals(
        Optional.of(new WaitHints.Hint(5_000, false)),
        WaitHints.sooner(Optional.of(announced), Optional.of(polled)));
    // The announced one is sooner, yet the other epoch's change would come unannounced.
    assertEquals(
        Optional.of(new WaitHints.Hint(2_000, false)),
        WaitHints.sooner(
            Optional.of(WaitHints.Hint.announcedBy(2_000)), Optional.of(WaitHints.Hint.at(9_000))));
    assertEquals(
        Optional.of(WaitHints.Hint.announcedBy(20_000)),
        WaitHints.sooner(Optional.of(announced), Optional.of(WaitHints.Hint.announcedBy(20_000))));
  }

  @Test
  void aHeldClaimNapsUntilAnAnnouncedChangeElseUntilItsRetryHint() {
    assertEquals(30_000, WaitHints.nap(WaitHints.Hint.announcedBy(30_000), 700));
    assertEquals(700, WaitHints.nap(WaitHints.Hint.at(30_000), 700));
    // Never sooner than the retry hint, which is never below the minimum wait.
    assertEquals(250, WaitHints.nap(WaitHints.Hint.announcedBy(10), 250));
  }
}
