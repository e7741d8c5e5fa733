package dev.rollcall.metrics;

import dev.rollcall.source.RunSource;
import dev.rollcall.source.RunSources;
import io.quarkus.runtime.StartupEvent;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.event.Observes;

/**
 * Publishes every configured namespace's series when the service starts ({@link
 * RecoveryMetrics#publish}).
 */
@ApplicationScoped
class NamespaceSeries {

  private final RunSources sources;
  private final RecoveryMetrics metrics;

  NamespaceSeries(RunSources sources, RecoveryMetrics metrics) {
    this.sources = sources;
    this.metrics = metrics;
  }

  void onStart(@Observes StartupEvent start) {
    for (RunSource source : sources.all()) {
      metrics.publish(source.namespace(), source.classifies());
    }
  }
}
