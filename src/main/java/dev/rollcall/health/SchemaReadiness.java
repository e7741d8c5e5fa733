package dev.rollcall.health;

import dev.rollcall.database.Database;
import dev.rollcall.database.Databases;
import io.quarkus.runtime.StartupEvent;
import io.smallrye.health.api.AsyncHealthCheck;
import io.smallrye.mutiny.Uni;
import io.smallrye.mutiny.infrastructure.Infrastructure;
import io.vertx.mutiny.sqlclient.Row;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.event.Observes;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;
import org.eclipse.microprofile.health.HealthCheckResponse;
import org.eclipse.microprofile.health.HealthCheckResponseBuilder;
import org.eclipse.microprofile.health.Readiness;
import org.flywaydb.core.Flyway;
import org.flywaydb.core.api.MigrationInfo;

/**
 * Ready only when Rollcall's schema has every migration this build ships applied, in each database
 * that answers ({@link DatabaseStates}: one that does not answer degrades its own namespaces, not
 * the replica). Any failure to tell reports DOWN rather than throwing. The default database's
 * figures are {@code version} and {@code pending}; another's are prefixed with its name.
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
  private final Databases databases;
  private volatile Set<String> shipped; // the versions of this build's migrations, once known

  SchemaReadiness(Flyway flyway, Databases databases) {
    this.flyway = flyway;
    this.databases = databases;
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
    HealthCheckResponseBuilder b = HealthCheckResponse.named(NAME);
    return expected
        .chain(
            versions -> {
              List<Uni<DatabaseStates.State>> each = new ArrayList<>();
              for (Database db : databases.all()) {
                each.add(check(db, versions, b));
              }
              return Uni.join().all(each).andFailFast();
            })
        .map(states -> b.status(DatabaseStates.ready(states)).build())
        .onFailure()
        .recoverWithItem(
            e -> HealthCheckResponse.named(NAME).down().withData("error", msg(e)).build());
  }

  /** One database's migrations, written into {@code b}; never fails. */
  private Uni<DatabaseStates.State> check(
      Database db, Set<String> versions, HealthCheckResponseBuilder b) {
    String prefix = Databases.DEFAULT.equals(db.name()) ? "" : db.name() + ".";
    return Databases.probePool(db)
        .query(
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
              long pending = versions.stream().filter(v -> !applied.contains(v)).count();
              synchronized (b) {
                b.withData(prefix + "version", current).withData(prefix + "pending", pending);
              }
              return pending == 0 && !applied.isEmpty() && db.migrated()
                  ? DatabaseStates.State.fine(db.name())
                  : DatabaseStates.State.wrong(
                      db.name(),
                      db.migrated() ? pending + " migrations pending" : db.notMigratedBecause());
            })
        .onFailure()
        .recoverWithItem(
            e -> {
              // No schema yet in a database that answers is a wrong one; one that does not answer
              // is only unreachable.
              boolean answers = DatabaseStates.answered(e);
              synchronized (b) {
                b.withData(prefix + "error", msg(e));
              }
              return answers
                  ? DatabaseStates.State.wrong(db.name(), msg(e))
                  : DatabaseStates.State.unreachable(db.name());
            });
  }

  private static String msg(Throwable e) {
    return String.valueOf(e.getMessage());
  }
}
