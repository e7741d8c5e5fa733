package dev.rollcall.api;

import dev.rollcall.registry.Caller;
import jakarta.enterprise.context.RequestScoped;

/** The instance the current request comes from, as {@link Credentials} resolved it. */
@RequestScoped
public class RequestCaller {

  private Caller caller;

  void set(Caller resolved) {
    caller = resolved;
  }

  /** The caller; only an endpoint that requires {@link Credentials#INSTANCE_TOKEN} has one. */
  Caller get() {
    if (caller == null) {
      throw new IllegalStateException("no caller: the endpoint does not require an instance token");
    }
    return caller;
  }
}
