package dev.rollcall.recovery;

import dev.rollcall.recovery.Verdict.Disposition;
import java.util.UUID;

/**
 * The classifier's decision table (the README's verdicts table, row by row): what the facts known
 * about one run decide. Pure; {@link Classifier} gathers the facts with set-based queries.
 */
final class DecisionTable {

  private DecisionTable() {}

  /**
   * What is known about one run.
   *
   * @param owned in the in-flight set of an instance not declared dead (row 1)
   * @param recentlyActive engine activity within the activity fence (row 2)
   * @param stranded an interrupted step whose owner message's job is gone (row 3)
   * @param liveQueuedJob a queued workflow job will wake it (row 4)
   * @param parkedOnHook its latest event is a created hook and no job of it is left (row 5)
   * @param unchangedSinceRedrive a sweep's: re-driven before and unchanged since (row 6)
   * @param pending status {@code pending} (row 7)
   * @param classified the engine's state was read (else the run is {@code unclassified})
   * @param openStep a step pending or running (row 8)
   * @param dueWait a wait due now (row 9)
   */
  record Signals(
      boolean owned,
      boolean recentlyActive,
      boolean stranded,
      boolean liveQueuedJob,
      boolean parkedOnHook,
      boolean unchangedSinceRedrive,
      boolean pending,
      boolean classified,
      boolean openStep,
      boolean dueWait) {

    /**
     * Row 5's proof: parked on a hook, and nothing else pending (no open step, no due wait). A hook
     * is proof only this way: the replay that created it ended there.
     */
    boolean parked() {
      return parkedOnHook && !openStep && !dueWait;
    }
  }

  /**
   * A verdict without its run.
   *
   * @param ownerMessage re-drive with the interrupted step's owner message id
   */
  record Decision(Disposition disposition, Reason reason, boolean ownerMessage) {

    Verdict verdict(String runId, String name, UUID deadInstanceId, String ownerMessageId) {
      Verdict v = new Verdict(runId, name, reason, disposition, deadInstanceId, null);
      return ownerMessage ? v.withMessageId(ownerMessageId) : v;
    }
  }

  private static Decision handOut(Reason reason) {
    return new Decision(Disposition.HAND_OUT, reason, false);
  }

  private static Decision skip(Reason reason) {
    return new Decision(Disposition.SKIP, reason, false);
  }

  /** A scanned run: owned or recently active ones wait for the re-check; the others are settled. */
  static Decision firstLook(Signals s) {
    return liveOrSettle(s, Disposition.DEFER);
  }

  /**
   * The re-check of a deferred run before its epoch closes: finished, still owned or still active
   * runs are skipped for good; the others are settled as on a first look.
   */
  static Decision recheck(boolean terminal, Signals s) {
    return terminal ? skip(Reason.TERMINAL) : liveOrSettle(s, Disposition.SKIP);
  }

  /** Rows 1 and 2 (a live owner, recent activity) with the given disposition, else rows 3 to 10. */
  private static Decision liveOrSettle(Signals s, Disposition live) {
    if (s.owned()) {
      return new Decision(live, Reason.OWNED_BY_LIVE_INSTANCE, false);
    }
    if (s.recentlyActive()) {
      return new Decision(live, Reason.RECENTLY_ACTIVE, false);
    }
    return settle(s);
  }

  /**
   * A dead instance's in-flight run: {@code owner-dead} unless it finished, a live peer owns it, a
   * queued job will wake it or it parked on a hook. A run a live peer reports is deferred, not
   * skipped: the report may be a heartbeat old, and the dead process may have left a write of the
   * run torn that only the re-check, once no live instance reports the run, may mend. Recent
   * activity is no proof here: it is the dead owner's own. A queued job (typically the dead owner's
   * own message, its lock just released) defers the run rather than settling it: the job may never
   * run as that message (a peer that queues the same job key while the dead worker still holds the
   * lock leaves the old job with no attempts left), and the takeover's re-check looks again ({@link
   * #takeoverRecheck}).
   */
  static Decision takeover(boolean terminal, Signals s) {
    return takeover(terminal, s, Disposition.DEFER);
  }

  /** {@link #takeover}, a run with a queued job given {@code queued}. */
  private static Decision takeover(boolean terminal, Signals s, Disposition queued) {
    if (terminal) {
      return skip(Reason.TERMINAL);
    }
    if (s.owned()) {
      return new Decision(Disposition.DEFER, Reason.OWNED_BY_LIVE_INSTANCE, false);
    }
    if (s.stranded()) {
      return new Decision(Disposition.HAND_OUT, Reason.OWNER_DEAD, true);
    }
    if (s.liveQueuedJob()) {
      return new Decision(queued, Reason.HAS_QUEUED_JOB, false);
    }
    if (s.parked()) {
      return skip(Reason.PARKED_ON_HOOK);
    }
    return handOut(Reason.OWNER_DEAD);
  }

  /**
   * A takeover's re-check of a run it deferred: deferred again while a live instance reports it, or
   * while a queued job may still wake it ({@code jobMayStillRun}: the re-check window is not over);
   * else settled as the takeover settles a run, a queued job then skipping it for good.
   */
  static Decision takeoverRecheck(boolean terminal, Signals s, boolean jobMayStillRun) {
    if (!terminal && s.owned()) {
      return new Decision(Disposition.DEFER, Reason.OWNED_BY_LIVE_INSTANCE, false);
    }
    return takeover(terminal, s, jobMayStillRun ? Disposition.DEFER : Disposition.SKIP);
  }

  /**
   * An unowned, quiet active run (rows 3 to 10): skipped only with proof of a wake path, else
   * re-driven. A queued job is no such proof for a run whose interrupted step's owner message is
   * gone: it would only re-arm the engine's delayed backstop; the run is re-driven with the owner's
   * message id, unless a sweep re-drove it so before and the engine wrote nothing since.
   */
  static Decision settle(Signals s) {
    if (s.stranded() && !s.unchangedSinceRedrive()) {
      return new Decision(Disposition.HAND_OUT, Reason.INTERRUPTED_STEP, true);
    }
    if (s.liveQueuedJob()) {
      return skip(Reason.HAS_QUEUED_JOB);
    }
    if (s.parked()) {
      return skip(Reason.PARKED_ON_HOOK);
    }
    if (s.unchangedSinceRedrive()) {
      return skip(Reason.UNCHANGED_SINCE_REDRIVE);
    }
    if (s.pending()) {
      return handOut(Reason.PENDING);
    }
    if (!s.classified()) {
      return handOut(Reason.UNCLASSIFIED);
    }
    if (s.openStep()) {
      return handOut(Reason.INTERRUPTED_STEP);
    }
    if (s.dueWait()) {
      return handOut(Reason.DUE_WAIT);
    }
    return handOut(Reason.NO_LIVE_WAKE_PATH);
  }
}
