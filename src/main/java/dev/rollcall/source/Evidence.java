package dev.rollcall.source;

/**
 * What an engine's own tables prove about one active run, read for a whole page at once.
 *
 * @param openStep a step is pending or running (the run was interrupted mid-step)
 * @param dueWait a wait is due now, or its resume time cannot be read
 * @param liveQueuedJob a queued job will wake the run: not exhausted, and unlocked or locked by a
 *     live instance's worker
 * @param recentEvent the engine wrote an event for the run within the activity fence
 * @param strandedOwner the owner message of a step interrupted inside its inline-ownership lease
 *     whose own job is gone (or can never run again): only a delivery of exactly that message
 *     re-runs the step now, any other job merely re-arms a delayed backstop. Null otherwise.
 */
public record Evidence(
    boolean openStep,
    boolean dueWait,
    boolean liveQueuedJob,
    boolean recentEvent,
    String strandedOwner) {

  /** No proof of anything. */
  public static final Evidence NONE = new Evidence(false, false, false, false, null);
}
