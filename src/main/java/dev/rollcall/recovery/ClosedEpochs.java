package dev.rollcall.recovery;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Epochs this service replica has read closed under their lock (a row lock reads the committed
 * row). An epoch never opens again once closed, so a claim that queued in memory for the lock of an
 * epoch that a claim ahead of it found closed skips it without a permit, a connection or the lock:
 * at the end of a pass, the claims of a replica queued for its lock learn it is over from the first
 * that takes the lock after the close, instead of each taking the lock in turn to read the same
 * thing. Only the database says so: not a notice, which any session may send. Bounded to the {@link
 * #REMEMBERED} most recently learnt; a forgotten one is read from the database again.
 */
final class ClosedEpochs {

  static final int REMEMBERED = 4096;

  private final Map<Long, Boolean> ids =
      new LinkedHashMap<>() {
        @Override
        protected boolean removeEldestEntry(Map.Entry<Long, Boolean> eldest) {
          return size() > REMEMBERED;
        }
      };

  /** The epoch's row, read under its lock, says it is closed. */
  synchronized void add(long epochId) {
    ids.put(epochId, Boolean.TRUE);
  }

  /** True when the epoch is known closed; false when it is open or not known here. */
  synchronized boolean contains(long epochId) {
    return ids.containsKey(epochId);
  }
}
