package dev.rollcall.recovery;

import com.fasterxml.jackson.annotation.JsonValue;

/** Why a run was re-driven or skipped. The wire strings are stable: API, ledger and metrics. */
public enum Reason {
  PENDING("pending", true),
  INTERRUPTED_STEP("interrupted-step", true),
  DUE_WAIT("due-wait", true),
  NO_LIVE_WAKE_PATH("no-live-wake-path", true),
  OWNER_DEAD("owner-dead", true),
  /** Re-driven without a classification (the source does not classify, or classifying failed). */
  UNCLASSIFIED("unclassified", true),
  OWNED_BY_LIVE_INSTANCE("owned-by-live-instance", false),
  RECENTLY_ACTIVE("recently-active", false),
  HAS_QUEUED_JOB("has-queued-job", false),
  /**
   * The run's last replay suspended on a hook (its latest event is {@code hook_created} and no job
   * of it is left): only resuming the hook moves it on.
   */
  PARKED_ON_HOOK("parked-on-hook", false),
  TERMINAL("terminal", false),
  /** Sweeps only: re-driven by an earlier epoch, and the engine has written nothing since. */
  UNCHANGED_SINCE_REDRIVE("unchanged-since-redrive", false),
  /**
   * A takeover's first look or any re-check: another epoch (the takeover of another instance that
   * reported the run, or of the instance that owned it when a pass deferred it; or a sweep) holds
   * the run in a batch to hand out now, or, at a re-check, has handed it out since the deferral.
   * That epoch answers for the run, its expired leases included.
   */
  HANDED_OUT_ELSEWHERE("handed-out-elsewhere", false),
  /**
   * Deferred: another epoch's transaction holds the run's hand-out lock, deciding it at this
   * moment; re-checked as any deferred run is, when that epoch's hand-out, if it made one, is seen.
   */
  HAND_OUT_UNDER_WAY("hand-out-under-way", false),
  /**
   * Ledger only: a queue lock released because no instance owns the worker holding it (none live,
   * none whose lease ran out and whose takeover is still to come).
   */
  ORPHANED_LOCK("orphaned-lock", false);

  private final String wire;
  private final boolean redrive;

  Reason(String wire, boolean redrive) {
    this.wire = wire;
    this.redrive = redrive;
  }

  /** The stable string. */
  @JsonValue
  public String wire() {
    return wire;
  }

  /** True when a run with this reason is handed out to be re-driven. */
  public boolean redrive() {
    return redrive;
  }

  /** The reason with this stable string. */
  public static Reason fromWire(String wire) {
    for (Reason r : values()) {
      if (r.wire.equals(wire)) {
        return r;
      }
    }
    throw new IllegalArgumentException("unknown reason: " + wire);
  }
}
