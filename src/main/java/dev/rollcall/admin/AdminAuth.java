package dev.rollcall.admin;

import dev.rollcall.config.RollcallConfig;
import dev.rollcall.error.Problems.Forbidden;
import dev.rollcall.error.Problems.Unauthorized;
import dev.rollcall.registry.Tokens;
import jakarta.enterprise.context.ApplicationScoped;

/**
 * The admin API's credential: {@code rollcall.admin.token}, compared in constant time. No header is
 * a 401, a wrong token a 403; while no token is configured, the admin API refuses everyone.
 */
@ApplicationScoped
public class AdminAuth {

  private final RollcallConfig config;

  AdminAuth(RollcallConfig config) {
    this.config = config;
  }

  /** Refuses the request unless it carries the admin token. */
  public void require(String authorization) {
    if (authorization == null || !authorization.regionMatches(true, 0, "Bearer ", 0, 7)) {
      throw new Unauthorized("the admin API needs 'Authorization: Bearer <admin token>'");
    }
    String given = authorization.substring(7).trim();
    String expected = config.admin().token().filter(t -> !t.isBlank()).orElse(null);
    if (expected == null) {
      throw new Forbidden("the admin API is disabled: set rollcall.admin.token");
    }
    if (!Tokens.constantTimeEquals(expected, given)) {
      throw new Forbidden("the admin token is wrong");
    }
  }
}
