package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.testing.Api.Batch;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Test;

/**
 * A complete rewrites the outcome of each of its batch's ledger rows. Those updates are HOT (no
 * index changes), which needs the outcome out of every index and room left on the ledger's pages.
 */
@ServiceTest
class LedgerHotUpdateTest extends ApiTestBase {

  @Test
  void aCompleteUpdatesItsLedgerRowsInPlace() throws Exception {
    Instance instance = api.register(SourceTables.LARGE, UUID.randomUUID().toString(), "hot");
    // Written by the service as every hand-out is: the ledger's pages as a pass leaves them.
    Batch batch = api.claimBatch(instance, 500);
    int runs = batch.runIds().size();
    assertTrue(runs >= 100, "a batch that fills several ledger pages: " + runs);

    // The complete's own statement, in a transaction of this test's, whose counts are its alone.
    try (Connection c = Db.database().connect()) {
      c.setAutoCommit(false);
      try (PreparedStatement update =
          c.prepareStatement(
              CompletionService.LEDGER_OUTCOMES
                  .replace("$1", "?")
                  .replace("$2", "?")
                  .replace("$3", "?"))) {
        // JDBC's placeholders go by position: $3 (the failed runs) comes first in the text.
        update.setArray(1, c.createArrayOf("text", new String[0]));
        update.setLong(2, batch.id());
        update.setInt(3, batch.fence());
        assertEquals(runs, update.executeUpdate());
      }
      try (PreparedStatement counts =
              c.prepareStatement(
                  "SELECT pg_stat_get_xact_tuples_updated('rollcall.ledger'::regclass),"
                      + " pg_stat_get_xact_tuples_hot_updated('rollcall.ledger'::regclass)");
          ResultSet r = counts.executeQuery()) {
        r.next();
        assertEquals(runs, r.getLong(1));
        assertEquals(runs, r.getLong(2), "every row of the batch updated in place (HOT)");
      }
      c.rollback();
    }
    api.complete(instance, batch, List.of()).expect(200);
  }
}
