package dev.rollcall.source;

import java.util.List;

/**
 * What a dead instance's workers were delivering when it died, read from the queue jobs whose locks
 * its takeover released: the messages, and for those that carried one step (a step's own message),
 * that step. A step torn by one of these deliveries has no live writer: the delivery that writes a
 * step holds its job's lock until it ends.
 *
 * @param messageIds the released jobs' message ids (a step's inline owner is one of these)
 * @param stepIds the steps the released step messages executed
 */
public record DeadDeliveries(List<String> messageIds, List<String> stepIds) {

  public DeadDeliveries {
    messageIds = List.copyOf(messageIds);
    stepIds = List.copyOf(stepIds);
  }

  /** True when no delivery is known, so nothing of a live-owned run can be mended. */
  public boolean isEmpty() {
    return messageIds.isEmpty() && stepIds.isEmpty();
  }
}
