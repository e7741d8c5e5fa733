package dev.rollcall.source;

import dev.rollcall.config.RollcallConfig;
import dev.rollcall.database.Databases;
import io.quarkus.runtime.StartupEvent;
import io.smallrye.mutiny.Uni;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.event.Observes;
import org.jboss.logging.Logger;

/**
 * The opt-in partial index on each runs table ({@code source.create-active-index=true}). It is
 * built concurrently (the engine keeps writing) in the background after startup, on one connection
 * of the reactive pool: no thread waits for it (the build may take minutes on a large table) and
 * the small JDBC pool stays Flyway's. Until it exists the scan stays linear, walking terminal rows
 * too. A failure is logged and changes nothing else.
 */
@ApplicationScoped
public class ActiveIndexes {

  private static final Logger LOG = Logger.getLogger(ActiveIndexes.class);

  private final RollcallConfig config;
  private final RunSources sources;
  private final Databases databases;

  ActiveIndexes(RollcallConfig config, RunSources sources, Databases databases) {
    this.config = config;
    this.sources = sources;
    this.databases = databases;
  }

  void onStart(@Observes StartupEvent start) {
    config
        .namespaces()
        .forEach(
            (ns, settings) -> {
              if (settings.source().createActiveIndex()) {
                sources
                    .get(ns)
                    .activeIndexDdl()
                    .ifPresent(ddl -> create(ns, ddl).subscribe().with(ignored -> {}));
              }
            });
  }

  /**
   * Runs the DDL as a simple query of its own: outside any transaction block, as CREATE INDEX
   * CONCURRENTLY requires, in the namespace's database. Completes when the index exists (or the
   * build failed, logged).
   */
  public Uni<Void> create(String namespace, String ddl) {
    return Uni.createFrom()
        .deferred(() -> databases.of(namespace).pool().query(ddl).execute())
        .invoke(
            ignored -> LOG.infof("namespace %s: active-runs index present (%s)", namespace, ddl))
        .onFailure()
        .invoke(
            e ->
                LOG.warnf(
                    "namespace %s: could not create the active-runs index, scans stay linear: %s",
                    namespace, e.getMessage()))
        .onFailure()
        .recoverWithNull()
        .replaceWithVoid();
  }
}
