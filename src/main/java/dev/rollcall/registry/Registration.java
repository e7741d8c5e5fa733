package dev.rollcall.registry;

import java.time.OffsetDateTime;
import java.util.UUID;

/** A new instance: its id, its one-time token and its first lease. */
public record Registration(UUID instanceId, String token, OffsetDateTime leaseExpiresAt) {}
