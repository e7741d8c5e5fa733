package dev.rollcall.health;

import dev.rollcall.source.RunSource;
import dev.rollcall.source.RunSources;
import io.smallrye.health.api.AsyncHealthCheck;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Pool;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.ArrayList;
import java.util.List;
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
        .map(
            failures -> {
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
              return b.status(up).build();
            });
  }
}
