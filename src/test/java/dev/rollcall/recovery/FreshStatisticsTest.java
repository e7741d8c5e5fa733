package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.testing.Db;
import dev.rollcall.testing.Poll;
import dev.rollcall.testing.ServiceTest;
import io.vertx.mutiny.sqlclient.Pool;
import jakarta.inject.Inject;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A table that grew far past its planner statistics (a fleet registering on a new database) is
 * analyzed at the next look, not at autovacuum's next visit; once analyzed it is left alone.
 */
@ServiceTest
class FreshStatisticsTest {

  @Inject FreshStatistics statistics;

  @Test
  void aTableThatGrewPastItsStatisticsIsAnalyzedOnce() {
    // Statistics that say "empty", as on a new database.
    Db.update("ANALYZE rollcall.instances");
    assertTrue(reltuples() < 1, "analyzed empty");
    Db.update(
        "INSERT INTO rollcall.instances (id, namespace, deployment_id, name, token_hash,"
            + " lease_expires_at) SELECT gen_random_uuid(), 'small', 'stats-deploy',"
            + " 'stats-' || g, decode(md5('stats-' || g), 'hex'), now() + interval '10 seconds'"
            + " FROM generate_series(1, 2000) g");
    // The statistics system counts the new rows once the inserting session reports them (at most
    // a second or so after its commit, later when idle): until then the look sees nothing stale.
    Poll.until(
        "the reaper's look finding a stale table",
        Duration.ofSeconds(30),
        () -> look().staleStatistics());
    theRuleInSqlIsTheRuleInJava();
    Poll.until(
        "rollcall.instances analyzed by the look",
        Duration.ofSeconds(30),
        () -> statistics.runOnce().await().indefinitely().contains("instances"));
    assertTrue(reltuples() >= 1000, "the planner now knows the rows: " + reltuples());
    List<String> again = statistics.runOnce().await().indefinitely();
    assertFalse(again.contains("instances"), "analyzed once, not at every look: " + again);
    theRuleInSqlIsTheRuleInJava();
  }

  @Inject ReaperTick tick;
  @Inject Pool pool;
  @Inject dev.rollcall.database.Databases databases;

  private ReaperTick.Look look() {
    return pool.withTransaction(conn -> tick.look(databases.primary(), conn))
        .await()
        .indefinitely();
  }

  /**
   * The look's rule ({@link FreshStatistics#STALE}) says of every table what {@code stale} says.
   */
  private static void theRuleInSqlIsTheRuleInJava() {
    for (List<String> r :
        Db.database()
            .rows(
                "SELECT t.relname, t.n_live_tup, t.reltuples, ("
                    + FreshStatistics.STALE
                    + ") FROM ("
                    + FreshStatistics.TABLES
                    + ") t")) {
      assertEquals(
          FreshStatistics.stale(Long.parseLong(r.get(1)), Double.parseDouble(r.get(2))),
          r.get(3).equals("t"),
          "rollcall." + r.get(0) + ": " + r);
    }
  }

  private static double reltuples() {
    return Double.parseDouble(
        Db.column("SELECT reltuples::text FROM pg_class WHERE oid = 'rollcall.instances'::regclass")
            .get(0));
  }
}
