package dev.rollcall.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.error.ProblemType;
import dev.rollcall.error.Problems;
import io.vertx.pgclient.PgException;
import io.vertx.sqlclient.ClosedConnectionException;
import jakarta.ws.rs.core.Response;
import java.io.IOException;
import java.net.ConnectException;
import java.net.SocketException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletionException;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Which failures are the database being unavailable (503) rather than a bug (500), and how domain
 * problems get their slug, title and status (from their {@link ProblemType}, which the protocol
 * page's table must list).
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
    // A terminated backend, as the pool often sees it.
    assertTrue(
        ProblemMapper.databaseUnreachable(
            new CompletionException(new SocketException("Connection reset"))));
  }

  @Test
  void otherDatabaseErrorsAreNot() {
    assertFalse(ProblemMapper.databaseUnreachable(pg("23505", "duplicate key value")));
    assertFalse(ProblemMapper.databaseUnreachable(pg("42P01", "relation does not exist")));
    assertFalse(ProblemMapper.databaseUnreachable(new IllegalStateException("a bug")));
  }

  @Test
  void everyProblemTypeHasItsOwnSlug() {
    Set<String> slugs = new HashSet<>();
    for (ProblemType t : ProblemType.values()) {
      assertTrue(slugs.add(t.slug()), t + " repeats the slug " + t.slug());
    }
  }

  @Test
  void theProtocolPageListsEveryProblemTypeWithItsStatus() throws IOException {
    Map<String, Integer> documented = new TreeMap<>();
    boolean inTable = false;
    for (String line : Files.readAllLines(Path.of("docs", "protocol.md"))) {
      if (line.equals("## Problem types")) {
        inTable = true;
      } else if (inTable && line.startsWith("| `")) {
        String[] cells = line.split("\\|");
        for (String slug : cells[1].split(",")) {
          documented.put(slug.trim().replace("`", ""), Integer.parseInt(cells[2].trim()));
        }
      } else if (inTable && line.startsWith("#")) {
        break;
      }
    }
    Map<String, Integer> declared = new TreeMap<>();
    for (ProblemType t : ProblemType.values()) {
      declared.put(t.slug(), t.status());
    }
    assertEquals(declared, documented);
  }

  @Test
  void aDomainProblemIsWrittenWithTheSlugTitleAndStatusOfItsType() {
    Response r = new ProblemMapper().domain(new Problems.Conflict("already closed"));
    assertEquals(409, r.getStatus());
    Problem p = (Problem) r.getEntity();
    assertEquals(Problem.TYPE_PREFIX + "conflict", p.type());
    assertEquals("Conflicts with the current state", p.title());
    assertEquals(409, p.status());
  }
}
