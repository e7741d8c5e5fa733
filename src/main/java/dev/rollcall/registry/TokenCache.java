package dev.rollcall.registry;

import java.nio.ByteBuffer;

/**
 * The instances whose tokens this service replica has seen, by token hash. What a token names (an
 * instance id, its namespace and deployment) never changes, so a hit spares the lookup without
 * deciding anything: whether the instance is still live is decided, as always, by the statement
 * that acts on it. Bounded: when full it starts over empty ({@link BoundedMap}).
 */
final class TokenCache {

  /** About 200 bytes an entry: a few MiB at most. */
  static final int DEFAULT_CAPACITY = 20_000;

  private final BoundedMap<ByteBuffer, Caller> callers;

  TokenCache(int capacity) {
    this.callers = new BoundedMap<>(capacity);
  }

  Caller get(byte[] tokenHash) {
    return callers.get(ByteBuffer.wrap(tokenHash));
  }

  void put(byte[] tokenHash, Caller caller) {
    callers.put(ByteBuffer.wrap(tokenHash.clone()), caller);
  }

  int size() {
    return callers.size();
  }
}
