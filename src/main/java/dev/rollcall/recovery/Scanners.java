package dev.rollcall.recovery;

/**
 * Who works an epoch's scan now: the instances other than the caller holding an unexpired range or
 * batch of it ({@code others}), whether the caller holds one ({@code mine}), and how long until the
 * first of those leases expires. Read under the epoch's lock, the count is exact for cuts (ranges
 * are cut only under that lock); an expired batch re-let without it may add one.
 */
record Scanners(long others, boolean mine, long msUntilFirstExpiry) {

  /**
   * Whether the caller may cut a page: it already works the scan (its next page costs no more
   * concurrency), or fewer than {@code limit} instances do; {@code limit} 0 means no limit.
   */
  boolean admit(int limit) {
    return limit <= 0 || mine || others < limit;
  }
}
