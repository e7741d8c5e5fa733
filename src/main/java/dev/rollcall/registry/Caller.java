package dev.rollcall.registry;

import java.util.UUID;

/** The instance a request's bearer token belongs to. Liveness is checked where it acts. */
public record Caller(UUID instanceId, String namespace, String deploymentId) {}
