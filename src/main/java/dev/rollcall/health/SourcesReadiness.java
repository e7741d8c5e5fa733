package dev.rollcall.health;

import dev.rollcall.database.Database;
import dev.rollcall.database.Databases;
import dev.rollcall.source.RunSource;
import dev.rollcall.source.RunSources;
import dev.rollcall.source.WorldPostgresSource;
import io.smallrye.health.api.AsyncHealthCheck;
import io.smallrye.mutiny.Uni;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.eclipse.microprofile.health.HealthCheckResponse;
import org.eclipse.microprofile.health.HealthCheckResponseBuilder;
import org.eclipse.microprofile.health.Readiness;

/**
 * Ready only when every namespace's run source can be read, column by column, in each database that
 * answers: a source whose database does not answer is reported so and degrades its namespace alone
 * ({@link DatabaseStates}).
 */
@Readiness
@ApplicationScoped
public class SourcesReadiness implements AsyncHealthCheck {

  private final Databases databases;
  private final RunSources sources;

  SourcesReadiness(Databases databases, RunSources sources) {
    this.databases = databases;
    this.sources = sources;
  }

  /**
   * One source's probe: null when readable, else what is wrong, and whether its database answered.
   */
  private record Probe(String namespace, String failure, boolean answered) {}

  @Override
  public Uni<HealthCheckResponse> call() {
    List<Uni<Probe>> probes = new ArrayList<>();
    for (RunSource source : sources.all()) {
      Database db = databases.of(source.namespace());
      probes.add(
          Uni.createFrom()
              .deferred(() -> source.probe(Databases.probePool(db)))
              .map(ok -> new Probe(source.namespace(), null, true))
              .onFailure()
              .recoverWithItem(
                  e ->
                      new Probe(
                          source.namespace(),
                          (DatabaseStates.answered(e) ? "" : "database '" + db.name() + "': ")
                              + source.describe()
                              + ": "
                              + e.getMessage(),
                          DatabaseStates.answered(e))));
    }
    if (probes.isEmpty()) {
      return Uni.createFrom()
          .item(
              HealthCheckResponse.named("rollcall-sources").up().withData("namespaces", 0).build());
    }
    return Uni.join()
        .all(probes)
        .andCollectFailures()
        .chain(
            found ->
                ambiguities()
                    .map(
                        warnings -> {
                          HealthCheckResponseBuilder b =
                              HealthCheckResponse.named("rollcall-sources")
                                  .withData("namespaces", sources.all().size());
                          List<DatabaseStates.State> states = new ArrayList<>();
                          for (Probe p : found) {
                            b.withData(
                                p.namespace(), p.failure() == null ? "readable" : p.failure());
                            String db = databases.of(p.namespace()).name();
                            states.add(
                                p.failure() == null
                                    ? DatabaseStates.State.fine(db)
                                    : p.answered()
                                        ? DatabaseStates.State.wrong(db, p.failure())
                                        : DatabaseStates.State.unreachable(db));
                          }
                          warnings.forEach((ns, w) -> b.withData(ns + ".warning", w));
                          return b.status(DatabaseStates.ready(states)).build();
                        }));
  }

  /**
   * Engine namespaces whose runs cannot be told apart from another namespace's in the same
   * database: the same engine schema, and either the same job prefix or no per-run job prefix
   * column to filter on (older engine versions). A warning, not a failure: recovery still works,
   * but each namespace also recovers the other's runs.
   */
  Uni<Map<String, String>> ambiguities() {
    List<WorldPostgresSource> engines =
        sources.all().stream()
            .filter(WorldPostgresSource.class::isInstance)
            .map(WorldPostgresSource.class::cast)
            .toList();
    Map<String, String> warnings = new TreeMap<>();
    List<Uni<Void>> checks = new ArrayList<>();
    for (WorldPostgresSource a : engines) {
      for (WorldPostgresSource b : engines) {
        if (a == b
            || !a.schema().equals(b.schema())
            || databases.of(a.namespace()) != databases.of(b.namespace())) {
          continue;
        }
        checks.add(
            Uni.createFrom()
                .deferred(() -> a.runsFiltered(Databases.probePool(databases.of(a.namespace()))))
                .onFailure()
                .recoverWithItem(false)
                .invoke(
                    filtered -> {
                      if (!filtered || a.jobPrefix().equals(b.jobPrefix())) {
                        warnings.put(
                            a.namespace(),
                            "runs cannot be told apart from namespace '"
                                + b.namespace()
                                + "' (same schema '"
                                + a.schema()
                                + "', "
                                + (filtered ? "same job prefix" : "no job_prefix column on runs")
                                + ")");
                      }
                    })
                .replaceWithVoid());
      }
    }
    if (checks.isEmpty()) {
      return Uni.createFrom().item(warnings);
    }
    return Uni.join().all(checks).andCollectFailures().replaceWith(warnings);
  }
}
