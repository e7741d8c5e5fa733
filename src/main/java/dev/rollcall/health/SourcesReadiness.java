package dev.rollcall.health;

import dev.rollcall.source.RunSource;
import dev.rollcall.source.RunSources;
import dev.rollcall.source.WorldPostgresSource;
import io.smallrye.health.api.AsyncHealthCheck;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Pool;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.eclipse.microprofile.health.HealthCheckResponse;
import org.eclipse.microprofile.health.HealthCheckResponseBuilder;
import org.eclipse.microprofile.health.Readiness;

/** Ready only when every namespace's run source can be read, column by column. */
@Readiness
@ApplicationScoped
public class SourcesReadiness implements AsyncHealthCheck {

  private final Pool pool;
  private final RunSources sources;

  SourcesReadiness(Pool pool, RunSources sources) {
    this.pool = pool;
    this.sources = sources;
  }

  @Override
  public Uni<HealthCheckResponse> call() {
    List<Uni<String>> probes = new ArrayList<>();
    for (RunSource source : sources.all()) {
      probes.add(
          source
              .probe(pool)
              .map(ok -> (String) null)
              .onFailure()
              .recoverWithItem(
                  e -> source.namespace() + ": " + source.describe() + ": " + e.getMessage()));
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
            failures ->
                ambiguities()
                    .map(
                        warnings -> {
                          HealthCheckResponseBuilder b =
                              HealthCheckResponse.named("rollcall-sources")
                                  .withData("namespaces", sources.all().size());
                          boolean up = true;
                          int i = 0;
                          for (RunSource source : sources.all()) {
                            String failure = failures.get(i++);
                            b.withData(source.namespace(), failure == null ? "readable" : failure);
                            up &= failure == null;
                          }
                          warnings.forEach((ns, w) -> b.withData(ns + ".warning", w));
                          return b.status(up).build();
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
        if (a == b || !a.schema().equals(b.schema())) {
          continue;
        }
        checks.add(
            a.runsFiltered(pool)
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
