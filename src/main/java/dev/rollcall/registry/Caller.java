package dev.rollcall.registry;

import dev.rollcall.error.Problems.Forbidden;
import java.util.UUID;

/** The instance a request's bearer token belongs to. Liveness is checked where it acts. */
public record Caller(UUID instanceId, String namespace, String deploymentId) {

  /** Refuses a caller acting on another instance's resource. */
  public void requireSelf(UUID instance) {
    if (!instanceId.equals(instance)) {
      throw new Forbidden("this token belongs to another instance");
    }
  }
}
