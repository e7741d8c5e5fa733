package dev.rollcall.demo;

import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.List;
import java.util.Map;
import org.jboss.logging.Logger;

/**
 * The run command's database when none is configured: an embedded PostgreSQL in a temporary
 * directory (deleted on exit), a {@code demo.runs} table seeded with a few thousand active runs,
 * and a {@code demo} namespace reading it. Nothing here runs when a database is configured.
 */
public final class EmbeddedDatabase implements AutoCloseable {

  private static final Logger LOG = Logger.getLogger(EmbeddedDatabase.class);

  /** The settings that mean "a database is configured", as system properties or variables. */
  static final List<String> DATABASE_KEYS =
      List.of("quarkus.datasource.jdbc.url", "quarkus.datasource.reactive.url");

  /** Registration secret of the demo namespace. */
  public static final String DEMO_SECRET = "demo-secret";

  /** Active runs in the demo table; as many terminal runs sit beside them. */
  public static final int DEMO_ACTIVE_RUNS = 3000;

  private final EmbeddedPostgres postgres;

  private EmbeddedDatabase(EmbeddedPostgres postgres) {
    this.postgres = postgres;
  }

  /** Starts the embedded database unless one is configured; null when one is. */
  public static EmbeddedDatabase startIfNoDatabaseConfigured() {
    for (String key : DATABASE_KEYS) {
      String env = key.toUpperCase().replace('.', '_');
      if (System.getProperty(key) != null || System.getenv(env) != null) {
        return null;
      }
    }
    try {
      EmbeddedPostgres pg = EmbeddedPostgres.builder().start();
      EmbeddedDatabase db = new EmbeddedDatabase(pg);
      db.seedDemo();
      db.configure();
      return db;
    } catch (IOException e) {
      throw new UncheckedIOException("could not start the embedded PostgreSQL", e);
    }
  }

  private void configure() {
    int port = postgres.getPort();
    Map<String, String> settings =
        Map.of(
            "quarkus.datasource.jdbc.url",
            "jdbc:postgresql://localhost:" + port + "/postgres",
            "quarkus.datasource.reactive.url",
            "postgresql://localhost:" + port + "/postgres",
            "quarkus.datasource.username",
            "postgres",
            "quarkus.datasource.password",
            "postgres");
    settings.forEach(System::setProperty);
    // The demo is read by a person at a terminal: plain log lines, not JSON.
    if (System.getProperty("quarkus.log.console.json.enabled") == null
        && System.getenv("QUARKUS_LOG_CONSOLE_JSON_ENABLED") == null) {
      System.setProperty("quarkus.log.console.json.enabled", "false");
    }
    if (!namespacesConfigured()) {
      Map.of(
              "registration-secret", DEMO_SECRET,
              "source.kind", "table",
              "source.schema", "demo",
              "source.table", "runs",
              "source.id-column", "id",
              "source.status-column", "status",
              "source.active-statuses", "pending,running",
              "source.name-column", "workflow_name",
              "source.created-at-column", "created_at",
              "source.queue-name-template", "__wkf_workflow_{name}")
          .forEach((k, v) -> System.setProperty("rollcall.namespaces.\"demo\"." + k, v));
    }
    LOG.infof(
        "No database configured: started an embedded PostgreSQL on port %d (user postgres,"
            + " database postgres) with namespace 'demo' over demo.runs (%d active runs)."
            + " Register with: curl -s -X POST localhost:8080/instances"
            + " -H 'Authorization: Bearer %s' -H 'Content-Type: application/json'"
            + " -d '{\"namespace\":\"demo\",\"deploymentId\":\"d1\",\"name\":\"me\"}'",
        port, DEMO_ACTIVE_RUNS, DEMO_SECRET);
  }

  private static boolean namespacesConfigured() {
    if (System.getProperties().stringPropertyNames().stream()
        .anyMatch(k -> k.startsWith("rollcall.namespaces."))) {
      return true;
    }
    return System.getenv().keySet().stream().anyMatch(k -> k.startsWith("ROLLCALL_NAMESPACES_"));
  }

  /** The demo runs table: ids sort by creation, only id/status/name are ever read. */
  private void seedDemo() {
    try (Connection c = postgres.getPostgresDatabase().getConnection();
        Statement s = c.createStatement()) {
      s.execute("ALTER USER postgres PASSWORD 'postgres'");
      s.execute("CREATE SCHEMA demo");
      s.execute(
          "CREATE TABLE demo.runs (id text PRIMARY KEY, workflow_name text NOT NULL,"
              + " status text NOT NULL, created_at timestamptz NOT NULL DEFAULT now(),"
              + " payload jsonb)");
      s.execute(
          "INSERT INTO demo.runs (id, workflow_name, status, created_at, payload)"
              + " SELECT 'wrun_' || lpad(n::text, 8, '0'),"
              + " (ARRAY['checkout', 'send-invoice', 'nightly-report'])[1 + n % 3],"
              + " CASE WHEN n % 2 = 0 THEN (CASE WHEN n % 6 = 0 THEN 'pending' ELSE 'running'"
              + " END) ELSE 'completed' END,"
              + " now() - interval '1 hour' + n * interval '1 millisecond',"
              + " jsonb_build_object('input', repeat('x', 200))"
              + " FROM generate_series(1, "
              + (2 * DEMO_ACTIVE_RUNS)
              + ") AS n");
    } catch (SQLException e) {
      throw new IllegalStateException("could not seed the demo runs table", e);
    }
  }

  @Override
  public void close() {
    try {
      postgres.close();
    } catch (IOException e) {
      LOG.warn("could not stop the embedded PostgreSQL cleanly", e);
    }
  }
}
