package dev.rollcall.health;

import jakarta.enterprise.context.ApplicationScoped;
import org.eclipse.microprofile.health.HealthCheck;
import org.eclipse.microprofile.health.HealthCheckResponse;
import org.eclipse.microprofile.health.Readiness;
import org.flywaydb.core.Flyway;
import org.flywaydb.core.api.MigrationInfo;

/**
 * Ready only when Rollcall's schema has every migration this build ships applied. Any failure to
 * tell (the database is down, say) reports DOWN rather than throwing.
 */
@Readiness
@ApplicationScoped
public class SchemaReadiness implements HealthCheck {

  private final Flyway flyway;

  SchemaReadiness(Flyway flyway) {
    this.flyway = flyway;
  }

  @Override
  public HealthCheckResponse call() {
    try {
      var info = flyway.info();
      MigrationInfo current = info.current();
      int pending = info.pending().length;
      return HealthCheckResponse.named("rollcall-schema")
          .status(pending == 0 && current != null)
          .withData("version", current == null ? "none" : current.getVersion().toString())
          .withData("pending", pending)
          .build();
    } catch (RuntimeException e) {
      return HealthCheckResponse.named("rollcall-schema")
          .down()
          .withData("error", String.valueOf(e.getMessage()))
          .build();
    }
  }
}
