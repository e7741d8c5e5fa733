package dev.rollcall.recovery;

/**
 * What still holds an epoch open: batches other claimers lease (and how long until the first lease
 * expires), and deferred runs (and how long until the first is due for its re-check).
 */
record Outstanding(long leased, long msUntilFirstExpiry, long deferred, long msUntilDeferredDue) {
  boolean any() {
    return leased > 0 || deferred > 0;
  }

  /** How long until something may change without anyone completing a batch. */
  long msUntilNextChange() {
    long leaseMs = leased > 0 ? msUntilFirstExpiry : Long.MAX_VALUE;
    long deferredMs = deferred > 0 ? msUntilDeferredDue : Long.MAX_VALUE;
    return Math.min(leaseMs, deferredMs);
  }

  /**
   * When a boot epoch's claimer should look again while this holds the epoch open: at the next
   * change, or, with nothing outstanding (a ready batch another claimer is taking right now, so the
   * close failed), after {@code waitMinMs}.
   */
  long msUntilNextLook(long waitMinMs) {
    return any() ? msUntilNextChange() : waitMinMs;
  }
}
