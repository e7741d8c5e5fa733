package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * When a tick of the session checks looks ({@link SessionReaper.Watch}): at every tick while a lock
 * is armed, and, once none is, again only when the reaper's look finds one or a heartbeat of this
 * replica records one held.
 */
@Tag("unit")
class SessionWatchTest {

  @Test
  void everyTickChecksUntilACheckFindsNoLockArmed() {
    SessionReaper.Watch watch = new SessionReaper.Watch(true);
    assertTrue(watch.due(0));
    watch.checked(0, true);
    assertTrue(watch.due(0), "a lock is armed: every tick checks");
    watch.checked(0, false);
    assertFalse(watch.due(0), "nothing armed: the ticks skip");
  }

  @Test
  void aHeldLockRecordedByThisReplicaWakesTheChecks() {
    SessionReaper.Watch watch = new SessionReaper.Watch(true);
    watch.checked(3, false);
    assertFalse(watch.due(3));
    assertTrue(watch.due(4), "a heartbeat recorded a lock held since");
    watch.checked(4, false);
    assertFalse(watch.due(4), "the check that followed found it gone again");
  }

  @Test
  void theReapersLookWakesTheChecksAndLetsThemRest() {
    SessionReaper.Watch watch = new SessionReaper.Watch(true);
    watch.checked(0, false);
    watch.looked(true);
    assertTrue(watch.due(0), "another replica's heartbeat armed a lock");
    watch.looked(false);
    assertFalse(watch.due(0));
  }

  @Test
  void withoutTheReapersLookEveryTickChecks() {
    SessionReaper.Watch watch = new SessionReaper.Watch(false);
    watch.checked(0, false);
    assertTrue(watch.due(0), "nothing else would wake the checks");
  }
}
