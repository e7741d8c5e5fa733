package dev.rollcall.api;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.vertx.pgclient.PgException;
import io.vertx.sqlclient.ClosedConnectionException;
import java.net.ConnectException;
import java.util.concurrent.CompletionException;
import org.junit.jupiter.api.Test;

/** Which failures are the database being unavailable (503) rather than a bug (500). */
class ProblemMapperTest {

  static PgException pg(String sqlState, String message) {
    return new PgException(message, "FATAL", sqlState, null);
  }

  @Test
  void aDatabaseThatIsDownRestartingOrRefusingConnectionsIsUnavailable() {
    assertTrue(ProblemMapper.databaseUnreachable(new ConnectException("Connection refused")));
    assertTrue(
        ProblemMapper.databaseUnreachable(
            new CompletionException(ClosedConnectionException.INSTANCE)));
    assertTrue(
        ProblemMapper.databaseUnreachable(
            pg("57P01", "terminating connection due to administrator command")));
    assertTrue(
        ProblemMapper.databaseUnreachable(pg("57P03", "the database system is starting up")));
    assertTrue(
        ProblemMapper.databaseUnreachable(new RuntimeException(pg("08006", "connection failure"))));
  }

  @Test
  void otherDatabaseErrorsAreNot() {
    assertFalse(ProblemMapper.databaseUnreachable(pg("23505", "duplicate key value")));
    assertFalse(ProblemMapper.databaseUnreachable(pg("42P01", "relation does not exist")));
    assertFalse(ProblemMapper.databaseUnreachable(new IllegalStateException("a bug")));
  }
}
