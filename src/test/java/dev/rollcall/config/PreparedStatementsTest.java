package dev.rollcall.config;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.rollcall.testing.ServiceTest;
import io.vertx.mutiny.sqlclient.Pool;
import io.vertx.mutiny.sqlclient.Tuple;
import jakarta.inject.Inject;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * The service's pooled connections keep the statements they prepare (Quarkus' default for
 * PostgreSQL): PostgreSQL then parses each statement once per connection and, from its sixth
 * execution on, may run a generic plan made without the arguments. The plan tests check those
 * generic plans beside the plans for their arguments ({@code Plans.explainAsCached}); this test
 * fails if the connections stop keeping their statements, and with it that reason.
 */
@ServiceTest
class PreparedStatementsTest {

  @Inject Pool pool;

  @Test
  void aStatementExecutedTwiceOnAPooledConnectionIsPreparedOnceAndKept() {
    String sql = "SELECT $1::int + 1 AS kept_statement_probe";
    long kept =
        pool.withConnection(
                conn ->
                    conn.preparedQuery(sql)
                        .execute(Tuple.of(1))
                        .chain(() -> conn.preparedQuery(sql).execute(Tuple.of(2)))
                        .chain(
                            () ->
                                conn.query(
                                        "SELECT count(*) AS n FROM pg_prepared_statements"
                                            + " WHERE statement LIKE '%kept_statement_probe%'")
                                    .execute())
                        .map(rows -> rows.iterator().next().getLong("n")))
            .await()
            .atMost(Duration.ofSeconds(10));
    assertEquals(1, kept);
  }
}
