package dev.rollcall.registry;

import java.util.concurrent.ConcurrentHashMap;

/**
 * A memo of at most {@code capacity} entries that starts over empty when full. For memos whose
 * entries only spare a lookup and decide nothing: forgetting them all costs each lookup once more.
 * The one eviction rule of {@link TokenCache}, {@link FoundMessages} and the trace contexts of
 * passes (recovery.PassTraces).
 */
public final class BoundedMap<K, V> {

  private final int capacity;
  private final ConcurrentHashMap<K, V> entries = new ConcurrentHashMap<>();

  public BoundedMap(int capacity) {
    this.capacity = capacity;
  }

  public V get(K key) {
    return entries.get(key);
  }

  public void put(K key, V value) {
    if (entries.size() >= capacity) {
      entries.clear();
    }
    entries.put(key, value);
  }

  int size() {
    return entries.size();
  }
}
