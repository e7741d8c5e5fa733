package dev.rollcall.health;

import io.vertx.pgclient.PgException;
import java.util.Collection;

/**
 * How a replica with several databases is ready: a database that does not answer degrades its own
 * namespaces alone (their requests answer {@code database-unavailable}, the others serve), so it
 * keeps the replica ready while another database answers; a database that answers but is wrong (its
 * schema not migrated, a source that cannot be read) is a deploy's mistake, and the replica is not
 * ready, as it is with one database.
 */
final class DatabaseStates {

  private DatabaseStates() {}

  /** What a readiness check found in one database: whether it answered, and what is wrong. */
  record State(String database, boolean answers, String problem) {

    static State unreachable(String database) {
      return new State(database, false, null);
    }

    static State fine(String database) {
      return new State(database, true, null);
    }

    static State wrong(String database, String problem) {
      return new State(database, true, problem);
    }
  }

  /**
   * Whether a failed statement was answered by the database (an error of the statement: no schema,
   * no table, no permission) rather than not reaching it, or reaching it while it shuts down or
   * starts (SQLSTATE classes 08 and 57P).
   */
  static boolean answered(Throwable failure) {
    return failure instanceof PgException pg
        && pg.getSqlState() != null
        && !pg.getSqlState().startsWith("08")
        && !pg.getSqlState().startsWith("57P");
  }

  /** Ready: some database answers, and every database that answers is right. */
  static boolean ready(Collection<State> states) {
    boolean someAnswers = false;
    for (State s : states) {
      if (s.answers()) {
        someAnswers = true;
        if (s.problem() != null) {
          return false;
        }
      }
    }
    return someAnswers;
  }
}
