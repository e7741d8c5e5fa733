package dev.rollcall.registry;

/**
 * One execution an instance reports: the run, and the queue message that delivered it when the
 * instance knows it (null otherwise). One run may be reported with several messages.
 */
public record InFlight(String runId, String messageId) {

  /** An execution known only by its run. */
  public static InFlight run(String runId) {
    return new InFlight(runId, null);
  }
}
