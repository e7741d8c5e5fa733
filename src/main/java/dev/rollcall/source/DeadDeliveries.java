package dev.rollcall.source;

import java.util.List;

/**
 * What a dead instance's workers were delivering when it died: the message ids of the queue jobs
 * whose locks its takeover released. A start of a step that names one of them as its inline owner
 * is no live process's: a step is written only by a delivery that started it.
 *
 * @param messageIds the released jobs' message ids
 */
public record DeadDeliveries(List<String> messageIds) {

  public DeadDeliveries {
    messageIds = List.copyOf(messageIds);
  }
}
