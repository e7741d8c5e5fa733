package dev.rollcall.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.error.DomainException;
import dev.rollcall.error.Problems;
import io.vertx.pgclient.PgException;
import io.vertx.sqlclient.ClosedConnectionException;
import jakarta.ws.rs.core.Response;
import java.lang.reflect.Modifier;
import java.net.ConnectException;
import java.util.Map;
import java.util.concurrent.CompletionException;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Which failures are the database being unavailable (503) rather than a bug (500), and how domain
 * problems get their status.
 */
@Tag("unit")
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

  /** A domain problem type that the mapper does not know. */
  static final class Unmapped extends DomainException {
    Unmapped() {
      super("something the service forgot to map", Map.of());
    }

    @Override
    public String slug() {
      return "unmapped";
    }

    @Override
    public String title() {
      return "Unmapped";
    }
  }

  @Test
  void aDomainProblemWithoutAStatusIsAnInternalErrorNotABadRequest() {
    Response r = new ProblemMapper().domain(new Unmapped());
    assertEquals(500, r.getStatus());
    Problem p = (Problem) r.getEntity();
    assertEquals(Problem.TYPE_PREFIX + "internal-error", p.type());
    assertTrue(p.extensions().containsKey("errorId"));
  }

  @Test
  void everyDomainProblemTypeHasAStatus() {
    for (Class<?> c : Problems.class.getDeclaredClasses()) {
      if (DomainException.class.isAssignableFrom(c) && !Modifier.isAbstract(c.getModifiers())) {
        assertTrue(ProblemMapper.STATUS.containsKey(c), c.getSimpleName() + " has no status");
      }
    }
  }

  @Test
  void aMappedDomainProblemKeepsItsStatusAndType() {
    Response r = new ProblemMapper().domain(new Problems.Conflict("already closed"));
    assertEquals(409, r.getStatus());
    assertEquals(Problem.TYPE_PREFIX + "conflict", ((Problem) r.getEntity()).type());
  }
}
