package dev.rollcall.registry;

import dev.rollcall.queue.QueueLocks.Reported;

/**
 * The reported messages whose queue job this service replica has found locked, by instance. Such a
 * job's worker is known from then on (learned for this instance or, first, for another), so the
 * instance's later heartbeats need not look it up again while they keep reporting the message. A
 * message whose job was not found locked yet is looked up at every heartbeat until it is. Bounded
 * ({@link BoundedMap}): when full it starts over empty, and its messages are looked up once more.
 */
final class FoundMessages {

  /** About 150 bytes an entry: a few MiB at most. */
  static final int DEFAULT_CAPACITY = 20_000;

  private final BoundedMap<Reported, Boolean> found;

  FoundMessages(int capacity) {
    this.found = new BoundedMap<>(capacity);
  }

  boolean contains(Reported message) {
    return found.get(message) != null;
  }

  void addAll(Iterable<Reported> messages) {
    for (Reported m : messages) {
      found.put(m, Boolean.TRUE);
    }
  }

  int size() {
    return found.size();
  }
}
