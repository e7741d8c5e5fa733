package dev.rollcall.health;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.health.DatabaseStates.State;
import io.vertx.pgclient.PgException;
import java.net.ConnectException;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** A database that does not answer degrades its namespaces; one that answers wrong, the replica. */
@Tag("unit")
class DatabaseStatesTest {

  @Test
  void oneDatabaseIsReadyWhenItAnswersRight() {
    assertTrue(DatabaseStates.ready(List.of(State.fine("default"))));
    assertFalse(DatabaseStates.ready(List.of(State.unreachable("default"))));
    assertFalse(DatabaseStates.ready(List.of(State.wrong("default", "2 migrations pending"))));
  }

  @Test
  void aDatabaseThatDoesNotAnswerKeepsTheReplicaReadyWhileAnotherAnswers() {
    assertTrue(DatabaseStates.ready(List.of(State.fine("default"), State.unreachable("b"))));
    assertTrue(DatabaseStates.ready(List.of(State.unreachable("default"), State.fine("b"))));
    assertFalse(
        DatabaseStates.ready(List.of(State.unreachable("default"), State.unreachable("b"))));
  }

  @Test
  void aDatabaseThatAnswersWrongMakesTheReplicaUnready() {
    assertFalse(DatabaseStates.ready(List.of(State.fine("default"), State.wrong("b", "no table"))));
  }

  @Test
  void aStatementsErrorIsAnAnswerAndAConnectionsFailureIsNot() {
    assertTrue(
        DatabaseStates.answered(new PgException("relation does not exist", "ERROR", "42P01", "")));
    assertFalse(DatabaseStates.answered(new PgException("shutting down", "FATAL", "57P01", "")));
    assertFalse(DatabaseStates.answered(new PgException("no connection", "FATAL", "08006", "")));
    assertFalse(DatabaseStates.answered(new ConnectException("Connection refused")));
  }
}
