package dev.rollcall.health;

import io.quarkus.runtime.StartupEvent;
import io.smallrye.health.api.AsyncHealthCheck;
import io.smallrye.mutiny.Uni;
import io.smallrye.mutiny.infrastructure.Infrastructure;
import io.vertx.mutiny.sqlclient.Pool;
import io.vertx.mutiny.sqlclient.Row;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.event.Observes;
import java.util.Arrays;
import java.util.HashSet;
import java.util.Set;
import java.util.stream.Collectors;
import org.eclipse.microprofile.health.HealthCheckResponse;
import org.eclipse.microprofile.health.Readiness;
import org.flywaydb.core.Flyway;
import org.flywaydb.core.api.MigrationInfo;

/**
 * Ready only when Rollcall's schema has every migration this build ships applied. Any failure to
 * tell (the database is down, say) reports DOWN rather than throwing.
 *
 * <p>Which versions this build ships is read through Flyway once, at startup, right after the
 * migrations ran. Every readiness call then reads the applied versions over the reactive pool, like
 * every other query of the service. It used to call {@code flyway.info()} on every probe, over the
 * JDBC pool (2 connections): when the database restarted, Flyway took a pooled connection whose
 * socket had died, failed to read its metadata and never returned it (Flyway 12's {@code
 * JdbcConnectionFactory} does not close the connection it opened when its constructor fails), so
 * after two probes the JDBC pool was empty for good and the replica stayed not ready until it was
 * restarted, although the database was back (found by {@code ChaosIT}).
 */
@Readiness
@ApplicationScoped
public class SchemaReadiness implements AsyncHealthCheck {

  private static final String NAME = "rollcall-schema";

  private final Flyway flyway;
  private final Pool pool;
  private volatile Set<String> shipped; // the versions of this build's migrations, once known

  SchemaReadiness(Flyway flyway, Pool pool) {
    this.flyway = flyway;
    this.pool = pool;
  }

  /** The migrations have just run (migrate at start): the database answers now. */
  void onStart(@Observes StartupEvent event) {
    try {
      shipped();
    } catch (RuntimeException e) {
      // Read again by the first readiness probe.
    }
  }

  private Set<String> shipped() {
    Set<String> versions = shipped;
    if (versions == null) {
      versions =
          Arrays.stream(flyway.info().all())
              .filter(m -> m.getVersion() != null && m.getState().isResolved())
              .map(MigrationInfo::getVersion)
              .map(Object::toString)
              .collect(Collectors.toUnmodifiableSet());
      shipped = versions;
    }
    return versions;
  }

  @Override
  public Uni<HealthCheckResponse> call() {
    Uni<Set<String>> expected =
        shipped != null
            ? Uni.createFrom().item(shipped)
            : Uni.createFrom()
                .item(this::shipped)
                .runSubscriptionOn(Infrastructure.getDefaultWorkerPool());
    return expected
        .chain(
            versions ->
                pool.query(
                        "SELECT version FROM rollcall.flyway_schema_history"
                            + " WHERE success AND version IS NOT NULL ORDER BY installed_rank")
                    .execute()
                    .map(
                        rows -> {
                          Set<String> applied = new HashSet<>();
                          String current = "none";
                          for (Row r : rows) {
                            current = r.getString("version");
                            applied.add(current);
                          }
                          long pending =
                              versions.stream().filter(v -> !applied.contains(v)).count();
                          return HealthCheckResponse.named(NAME)
                              .status(pending == 0 && !applied.isEmpty())
                              .withData("version", current)
                              .withData("pending", pending)
                              .build();
                        }))
        .onFailure()
        .recoverWithItem(
            e ->
                HealthCheckResponse.named(NAME)
                    .down()
                    .withData("error", String.valueOf(e.getMessage()))
                    .build());
  }
}
