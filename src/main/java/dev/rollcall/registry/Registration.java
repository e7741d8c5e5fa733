package dev.rollcall.registry;

import java.time.OffsetDateTime;
import java.util.UUID;

/**
 * A new instance: its id, its one-time token, its first lease and the second key of its session
 * lock ({@link SessionLiveness}).
 */
public record Registration(
    UUID instanceId, String token, OffsetDateTime leaseExpiresAt, int sessionLockObjId) {}
