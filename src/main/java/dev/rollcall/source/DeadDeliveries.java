package dev.rollcall.source;

import java.util.List;

/**
 * What a dead instance's workers were delivering when it died: the message ids of the queue jobs
 * whose locks its takeover released. A step whose every start (since its last retry) names one of
 * them as its inline owner has no live writer: no live delivery started it, and a step is written
 * only by a delivery that started it.
 *
 * @param messageIds the released jobs' message ids
 */
public record DeadDeliveries(List<String> messageIds) {

  public DeadDeliveries {
    messageIds = List.copyOf(messageIds);
  }

  /** True when no delivery is known, so nothing of a live-owned run can be mended. */
  public boolean isEmpty() {
    return messageIds.isEmpty();
  }
}
