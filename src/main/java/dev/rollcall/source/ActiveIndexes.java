package dev.rollcall.source;

import dev.rollcall.config.RollcallConfig;
import io.agroal.api.AgroalDataSource;
import io.quarkus.runtime.StartupEvent;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.event.Observes;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.concurrent.CompletableFuture;
import org.jboss.logging.Logger;

/**
 * The opt-in partial index on each runs table ({@code source.create-active-index=true}). It is
 * built concurrently (the engine keeps writing) in the background after startup; until it exists
 * the scan stays linear, walking terminal rows too. A failure is logged and changes nothing else.
 */
@ApplicationScoped
public class ActiveIndexes {

  private static final Logger LOG = Logger.getLogger(ActiveIndexes.class);

  private final RollcallConfig config;
  private final RunSources sources;
  private final AgroalDataSource jdbc;

  ActiveIndexes(RollcallConfig config, RunSources sources, AgroalDataSource jdbc) {
    this.config = config;
    this.sources = sources;
    this.jdbc = jdbc;
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
                    .ifPresent(ddl -> CompletableFuture.runAsync(() -> create(ns, ddl)));
              }
            });
  }

  /** Runs the DDL outside a transaction, as CREATE INDEX CONCURRENTLY requires. */
  public void create(String namespace, String ddl) {
    try (Connection c = jdbc.getConnection();
        Statement s = c.createStatement()) {
      c.setAutoCommit(true);
      s.execute(ddl);
      LOG.infof("namespace %s: active-runs index present (%s)", namespace, ddl);
    } catch (SQLException e) {
      LOG.warnf(
          "namespace %s: could not create the active-runs index, scans stay linear: %s",
          namespace, e.getMessage());
    }
  }
}
