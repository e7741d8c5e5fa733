package dev.rollcall.recovery;

/** The answer to one claim: exactly one of a batch, a wait hint, or done. */
public sealed interface ClaimResult {

  /** A batch to enqueue and complete. */
  record Batch(LeasedBatch batch) implements ClaimResult {}

  /**
   * Other claimers hold the remaining batches; ask again after {@code retryAfterMs}. {@code napMs}:
   * how long the service may hold the claim before it looks again itself, unless a notice wakes it
   * ({@link WaitHints#nap}); never shorter than {@code retryAfterMs}.
   */
  record Wait(long retryAfterMs, long napMs) implements ClaimResult {}

  /**
   * Nothing left for this instance; {@code epochId} is its deploy's boot epoch (null when boot
   * recovery of the namespace is switched off and the deploy has none).
   */
  record Done(Long epochId) implements ClaimResult {}
}
