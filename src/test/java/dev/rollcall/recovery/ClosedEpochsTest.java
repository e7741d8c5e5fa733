package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class ClosedEpochsTest {

  @Test
  void anEpochReadClosedIsKnownClosedAndNoOtherIs() {
    ClosedEpochs closed = new ClosedEpochs();
    closed.add(7);
    assertTrue(closed.contains(7));
    assertFalse(closed.contains(8));
  }

  @Test
  void onlyTheMostRecentlyLearntAreKept() {
    ClosedEpochs closed = new ClosedEpochs();
    for (long id = 1; id <= ClosedEpochs.REMEMBERED + 1; id++) {
      closed.add(id);
    }
    assertFalse(closed.contains(1), "the first learnt is forgotten: read from the database again");
    assertTrue(closed.contains(2));
    assertTrue(closed.contains(ClosedEpochs.REMEMBERED + 1));
  }
}
