package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** What holds an epoch open, when its boot claimer looks again, and when a batch is given up. */
@Tag("unit")
class BatchDecisionsTest {

  @Test
  void leasedBatchesOrDeferredRunsHoldAnEpochOpen() {
    assertFalse(new Outstanding(0, 0, 0, 0).any());
    assertTrue(new Outstanding(1, 500, 0, 0).any());
    assertTrue(new Outstanding(0, 0, 1, 500).any());
  }

  @Test
  void theNextChangeIsTheFirstLeaseExpiryOrDeferredRunFallingDueWhicheverComesFirst() {
    assertEquals(500, new Outstanding(2, 500, 3, 900).msUntilNextChange());
    assertEquals(300, new Outstanding(2, 500, 3, 300).msUntilNextChange());
    // A count of zero means its time is meaningless (the query returns 0 then), not "now".
    assertEquals(900, new Outstanding(0, 0, 3, 900).msUntilNextChange());
    assertEquals(500, new Outstanding(2, 500, 0, 0).msUntilNextChange());
    assertEquals(Long.MAX_VALUE, new Outstanding(0, 0, 0, 0).msUntilNextChange());
  }

  @Test
  void aBootClaimerLooksAgainAtTheNextChangeOrAfterTheShortestWaitWhenNothingIsOutstanding() {
    assertEquals(1_200, new Outstanding(1, 1_200, 0, 0).msUntilNextLook(250));
    assertEquals(40, new Outstanding(0, 0, 1, 40).msUntilNextLook(250));
    // Nothing outstanding but the close failed: a ready batch another claimer is taking now.
    assertEquals(250, new Outstanding(0, 0, 0, 0).msUntilNextLook(250));
  }

  @Test
  void aBatchHandedOutMaxAttemptsTimesIsGivenUp() {
    assertFalse(new Batches.Claimable(1, "leased", 2, 4).exhausted(5));
    assertTrue(new Batches.Claimable(1, "leased", 2, 5).exhausted(5));
    assertTrue(new Batches.Claimable(1, "ready", 0, 6).exhausted(5));
  }

  @Test
  void aRangeRetakenMaxAttemptsTimesIsPoisonAndHandedOutUnclassified() {
    assertFalse(new Batches.Range(1, 1, List.of("r"), 4).poison(5));
    assertTrue(new Batches.Range(1, 1, List.of("r"), 5).poison(5));
  }

  @Test
  void failedRunsAreHandedOutAgainOnlyFromABatchStillLeasedAndBelowItsLastAttempt() {
    assertTrue(CompletionService.handsOutAgain("leased", 1, 1, 3));
    assertFalse(CompletionService.handsOutAgain("leased", 0, 1, 3), "nothing failed");
    assertFalse(CompletionService.handsOutAgain("leased", 2, 3, 3), "its last hand-out");
    assertFalse(CompletionService.handsOutAgain("abandoned", 1, 1, 3), "its pass was closed");
  }
}
