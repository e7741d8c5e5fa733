package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.OptionalLong;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

@Tag("unit")
class ClosedEpochsTest {

  @Test
  void anEpochReadClosedIsKnownClosedAndNoOtherIs() {
    ClosedEpochs closed = new ClosedEpochs();
    closed.add("ns", 7);
    assertTrue(closed.contains("ns", 7));
    assertFalse(closed.contains("ns", 8));
    // Each database numbers its own epochs: epoch 7 of another namespace is another epoch.
    assertFalse(closed.contains("other", 7));
  }

  @Test
  void onlyTheMostRecentlyLearntAreKept() {
    ClosedEpochs closed = new ClosedEpochs();
    for (long id = 1; id <= ClosedEpochs.REMEMBERED + 1; id++) {
      closed.add("ns", id);
    }
    assertFalse(
        closed.contains("ns", 1), "the first learnt is forgotten: read from the database again");
    assertTrue(closed.contains("ns", 2));
    assertTrue(closed.contains("ns", ClosedEpochs.REMEMBERED + 1));
  }

  @Test
  void aDeploysClosedPassIsKnownByNamespaceAndDeployUntilForgotten() {
    ClosedEpochs closed = new ClosedEpochs();
    closed.addBoot("ns", "d1", 7);
    assertEquals(OptionalLong.of(7), closed.bootOf("ns", "d1"));
    assertTrue(closed.bootOf("ns", "d2").isEmpty());
    assertTrue(closed.bootOf("other", "d1").isEmpty());
    closed.forgetBoot("ns", "d1", 8);
    assertEquals(
        OptionalLong.of(7), closed.bootOf("ns", "d1"), "another epoch's id forgets nothing");
    closed.forgetBoot("ns", "d1", 7);
    assertTrue(closed.bootOf("ns", "d1").isEmpty());
  }

  @Test
  void onlyTheMostRecentlyLearntDeploysAreKept() {
    ClosedEpochs closed = new ClosedEpochs();
    for (int d = 1; d <= ClosedEpochs.REMEMBERED + 1; d++) {
      closed.addBoot("ns", "d" + d, d);
    }
    assertTrue(closed.bootOf("ns", "d1").isEmpty());
    assertEquals(OptionalLong.of(2), closed.bootOf("ns", "d2"));
  }
}
