package dev.rollcall.testing;

import io.quarkus.test.junit.callback.QuarkusTestBeforeEachCallback;
import io.quarkus.test.junit.callback.QuarkusTestMethodContext;

/**
 * Every service test starts from an empty {@code rollcall} schema: no instance, epoch, batch or
 * ledger row of an earlier test, in either database, so no test drains another's leftovers. Only
 * the Flyway history stays, and the housekeeping row the migrations seed is put back. The engines'
 * schemas (runs, queue jobs) are shared fixtures and stay as they are.
 */
public class CleanSchema implements QuarkusTestBeforeEachCallback {

  /**
   * One statement, one transaction. The lock timeout turns a request of an earlier test still
   * holding a row lock into a clear failure instead of a hang.
   */
  private static final String CLEAN =
      "DO $$ DECLARE tables text; BEGIN"
          + " SET LOCAL lock_timeout = '10s';"
          + " SELECT string_agg(format('%I.%I', schemaname, tablename), ', ') INTO tables"
          + "   FROM pg_tables WHERE schemaname = 'rollcall'"
          + "   AND tablename <> 'flyway_schema_history';"
          + " EXECUTE 'TRUNCATE ' || tables;"
          + " INSERT INTO rollcall.housekeeping (job) VALUES ('retention'), ('orphaned-locks');"
          + " END $$";

  @Override
  public void beforeEach(QuarkusTestMethodContext context) {
    if (Db.database() == null) {
      throw new IllegalStateException("no test database is bound: the test resource did not start");
    }
    Db.update(CLEAN);
    // The second database's rollcall schema too: a pass over every database counts its rows.
    TestDatabase second = RollcallTestResource.second();
    if (second != null) {
      second.update(CLEAN);
    }
  }
}
