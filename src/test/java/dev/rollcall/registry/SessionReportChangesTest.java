package dev.rollcall.registry;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.registry.SessionLiveness.Recorded;
import dev.rollcall.registry.SessionLiveness.Report;
import dev.rollcall.registry.SessionLiveness.SessionReport;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Which heartbeat reports are recorded ({@link SessionLiveness#changes}): only those that could
 * change what the instance row says, so that a fleet's steady beats neither read {@code pg_locks}
 * nor write their rows a second time.
 */
@Tag("unit")
class SessionReportChangesTest {

  static final SessionReport HELD_BY_42 = new SessionReport(Report.HELD, 42, false);

  @Test
  void theSameLockHeldByTheSameBackendWithNoSightingChangesNothing() {
    assertFalse(SessionLiveness.changes(HELD_BY_42, new Recorded("held", 42, false)));
  }

  @Test
  void aSightingOfTheLockMissingIsAnsweredByTheNextReport() {
    assertTrue(SessionLiveness.changes(HELD_BY_42, new Recorded("held", 42, true)));
  }

  @Test
  void anotherBackendOrAReconnectIsRecorded() {
    assertTrue(SessionLiveness.changes(HELD_BY_42, new Recorded("held", 41, false)));
    assertTrue(SessionLiveness.changes(HELD_BY_42, new Recorded("held", null, false)));
    assertTrue(
        SessionLiveness.changes(
            new SessionReport(Report.HELD, 42, true), new Recorded("held", 42, false)));
  }

  @Test
  void heldOverAnyOtherRecordedStateIsLookedIntoAgain() {
    for (String lock : new String[] {"none", "unseen", "lost", "unavailable"}) {
      assertTrue(SessionLiveness.changes(HELD_BY_42, new Recorded(lock, 42, false)), lock);
    }
  }

  @Test
  void aLossOrAnUnavailableLockIsRecordedOnceWhileItLasts() {
    SessionReport lost = new SessionReport(Report.LOST, null, false);
    SessionReport unavailable = new SessionReport(Report.UNAVAILABLE, null, false);
    assertTrue(SessionLiveness.changes(lost, new Recorded("held", 42, false)));
    assertFalse(SessionLiveness.changes(lost, new Recorded("lost", null, false)));
    assertTrue(SessionLiveness.changes(unavailable, new Recorded("lost", null, false)));
    assertFalse(SessionLiveness.changes(unavailable, new Recorded("unavailable", null, false)));
  }
}
