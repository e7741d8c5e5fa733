package dev.rollcall.recovery;

import jakarta.inject.Singleton;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.OptionalLong;

/**
 * Epochs this service replica has read closed under their lock (a row lock reads the committed
 * row). An epoch never opens again once closed, so a claim that queued in memory for the lock of an
 * epoch that a claim ahead of it found closed skips it without a permit, a connection or the lock:
 * at the end of a pass, the claims of a replica queued for its lock learn it is over from the first
 * that takes the lock after the close, instead of each taking the lock in turn to read the same
 * thing. Only the database says so: not a notice, which any session may send. Bounded to the {@link
 * #REMEMBERED} most recently learnt; a forgotten one is read from the database again.
 *
 * <p>The same for deploys: the boot epoch of a deploy, once a claim's first look read its row
 * closed, so that the deploy's later claims are answered "done" from one read ({@link PassOver}). A
 * deploy's boot epoch is the only one it ever has unless retention deletes it; such an entry is
 * forgotten when a claim finds the row gone. One per service replica, shared by the stages of its
 * claims.
 */
@Singleton
final class ClosedEpochs {

  static final int REMEMBERED = 4096;

  /** Closed epochs, by {@link #epoch}: an epoch's id is its database's, so the key names both. */
  private final Map<String, Boolean> ids = bounded();

  /** Each deploy's closed boot epoch, by namespace and deploy. */
  private final Map<String, Long> boots = bounded();

  private static <K, V> Map<K, V> bounded() {
    return new LinkedHashMap<>() {
      @Override
      protected boolean removeEldestEntry(Map.Entry<K, V> eldest) {
        return size() > REMEMBERED;
      }
    };
  }

  /** The epoch's row, read under its lock, says it is closed. */
  synchronized void add(String namespace, long epochId) {
    ids.put(epoch(namespace, epochId), Boolean.TRUE);
  }

  /** True when the epoch is known closed; false when it is open or not known here. */
  synchronized boolean contains(String namespace, long epochId) {
    return ids.containsKey(epoch(namespace, epochId));
  }

  /** The deploy's boot epoch, read from its row, is closed. */
  synchronized void addBoot(String namespace, String deploymentId, long epochId) {
    boots.put(deploy(namespace, deploymentId), epochId);
  }

  /** The deploy's boot epoch when it is known closed here; empty when open or not known. */
  synchronized OptionalLong bootOf(String namespace, String deploymentId) {
    Long id = boots.get(deploy(namespace, deploymentId));
    return id == null ? OptionalLong.empty() : OptionalLong.of(id);
  }

  /** The deploy's boot epoch {@code epochId} is gone (deleted by retention): forget it. */
  synchronized void forgetBoot(String namespace, String deploymentId, long epochId) {
    boots.remove(deploy(namespace, deploymentId), epochId);
  }

  /**
   * An epoch's key in memory, by namespace and id: each database numbers its own epochs, and a
   * namespace lives in one database.
   */
  static String epoch(String namespace, long epochId) {
    return namespace + '\n' + epochId;
  }

  /** A deploy's key in memory, by namespace and deploy (also the key of ClaimService's looks). */
  static String deploy(String namespace, String deploymentId) {
    return namespace + '\n' + deploymentId;
  }
}
