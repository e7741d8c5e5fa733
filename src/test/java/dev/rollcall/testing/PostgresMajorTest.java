package dev.rollcall.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/**
 * The service tests run on the PostgreSQL major the build asked for: the newest by default, an
 * older one under a {@code -Ppg13}…{@code pg16} profile (the README's "Tested with" names the
 * majors CI runs). A database given by {@code ROLLCALL_TEST_JDBC_URL} is whatever it is, but never
 * older than the oldest major Rollcall supports.
 */
@ServiceTest
class PostgresMajorTest extends ApiTestBase {

  /** The oldest PostgreSQL major Rollcall supports (docs/deploying.md). */
  static final int OLDEST = 13;

  @Test
  void theTestsRunOnTheMajorTheBuildAskedFor() {
    long major = Db.number("SELECT current_setting('server_version_num')::int / 10000");
    assertTrue(major >= OLDEST, "PostgreSQL " + major + " is older than " + OLDEST);
    if (!Db.database().origin().equals("ROLLCALL_TEST_JDBC_URL")) {
      assertEquals(TestDatabase.requestedMajor(), major, Db.database().origin());
    }
  }
}
