package dev.rollcall.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** The recovery benchmark's summary of repeated pairs: mean difference and its 95 % interval. */
@Tag("unit")
class PairedDifferencesTest {

  @Test
  void threePairsUseStudentsTWithTwoDegreesOfFreedom() {
    // mean 2, sample standard deviation 1: half width 4.303 / sqrt(3) = 2.4843
    PairedDifferences d = PairedDifferences.of(List.of(1.0, 2.0, 3.0));
    assertEquals(3, d.n());
    assertEquals(2.0, d.mean(), 1e-9);
    assertEquals(2.0 - 2.4843, d.low(), 1e-3);
    assertEquals(2.0 + 2.4843, d.high(), 1e-3);
  }

  @Test
  void equalDifferencesHaveNoWidth() {
    PairedDifferences d = PairedDifferences.of(List.of(-0.5, -0.5, -0.5, -0.5));
    assertEquals(-0.5, d.low(), 1e-12);
    assertEquals(-0.5, d.high(), 1e-12);
  }

  @Test
  void aSignThatFlipsBetweenPairsGivesAnIntervalAcrossZero() {
    PairedDifferences d = PairedDifferences.of(List.of(0.16, -0.27, -0.45, 0.03));
    assertTrue(d.low() < 0 && d.high() > 0, d.describe());
    assertEquals("n = 4, mean -0.13, 95 % interval -0.57 to +0.31", d.describe());
  }

  @Test
  void manyPairsFallBackToTheNormalQuantile() {
    assertEquals(2.042, PairedDifferences.t975(30), 1e-9);
    assertEquals(1.960, PairedDifferences.t975(31), 1e-9);
  }

  @Test
  void onePairHasNoIntervalAndNoPairsIsAnError() {
    PairedDifferences d = PairedDifferences.of(List.of(0.3));
    assertTrue(Double.isNaN(d.low()));
    assertEquals("n = 1, +0.30 (no interval from one pair)", d.describe());
    assertThrows(IllegalArgumentException.class, () -> PairedDifferences.of(List.of()));
  }
}
