package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** When a table's planner statistics are stale enough to analyze it ({@link FreshStatistics}). */
@Tag("unit")
class FreshStatisticsRuleTest {

  @Test
  void aSmallTableIsNeverStale() {
    assertFalse(FreshStatistics.stale(FreshStatistics.MIN_ROWS - 1, -1));
    assertFalse(FreshStatistics.stale(FreshStatistics.MIN_ROWS - 1, 0));
  }

  @Test
  void aTableNeverAnalyzedOrAnalyzedEmptyIsStaleOnceItHoldsRows() {
    assertTrue(FreshStatistics.stale(FreshStatistics.MIN_ROWS, -1));
    assertTrue(FreshStatistics.stale(3000, 0));
  }

  @Test
  void aTableIsStaleOnceItGrewPastTwiceItsStatistics() {
    assertFalse(FreshStatistics.stale(2000, 1000));
    assertTrue(FreshStatistics.stale(2001, 1000));
    assertFalse(FreshStatistics.stale(1000, 3000), "a table that shrank is left to autovacuum");
  }

  @Test
  void tableNamesAreQuotedIdentifiers() {
    assertEquals("\"instances\"", FreshStatistics.quoted("instances"));
    assertEquals("\"a\"\"b\"", FreshStatistics.quoted("a\"b"));
  }
}
