package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** Who may cut the next page of a scan ({@link Scanners#admit}). */
@Tag("unit")
class ScannersTest {

  @Test
  void roomUnderTheLimit() {
    assertTrue(new Scanners(3, false, 0).admit(4));
    assertFalse(new Scanners(4, false, 0).admit(4));
    assertFalse(new Scanners(9, false, 0).admit(4));
  }

  @Test
  void anInstanceAlreadyWorkingTheScanMayTakeItsNextPage() {
    assertTrue(new Scanners(4, true, 0).admit(4));
    assertTrue(new Scanners(7, true, 0).admit(4));
  }

  @Test
  void zeroMeansNoLimit() {
    assertTrue(new Scanners(1000, false, 0).admit(0));
  }
}
