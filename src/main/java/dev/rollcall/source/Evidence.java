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
 * @param parkedOnHook the run's latest event is {@code hook_created} and the queue holds no job of
 *     the run at all (none queued, none locked): the delivery that created the hook finished, so
 *     the replay suspended on that hook, and only a resumption of the hook (which writes {@code
 *     hook_received} and enqueues a job) can move the run on
 */
public record Evidence(
    boolean openStep,
    boolean dueWait,
    boolean liveQueuedJob,
    boolean recentEvent,
    String strandedOwner,
    boolean parkedOnHook) {

  /** No proof of anything. */
  public static final Evidence NONE = new Evidence(false, false, false, false, null, false);
}
