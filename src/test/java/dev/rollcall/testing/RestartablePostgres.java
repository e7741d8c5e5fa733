package dev.rollcall.testing;

import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Comparator;
import java.util.stream.Stream;

/**
 * An embedded PostgreSQL that a test can stop and start again, on the same port and the same data
 * directory (under {@code target/}), as an operator restarting the database would: everything
 * committed before {@link #stop()} is there after {@link #start()}. Clients connected at the stop
 * lose their connections; new ones are refused until the start.
 */
public final class RestartablePostgres implements AutoCloseable {

  private final Path dataDirectory;
  private final int port;
  private EmbeddedPostgres postgres; // null while stopped

  private RestartablePostgres(Path dataDirectory, int port) {
    this.dataDirectory = dataDirectory;
    this.port = port;
  }

  /**
   * Creates a fresh cluster in {@code target/<name>-pgdata} (anything left there by an earlier run
   * is removed first) on a free port, and starts it.
   */
  public static RestartablePostgres create(String name) {
    try {
      Path dir = Path.of("target", name + "-pgdata").toAbsolutePath();
      deleteRecursively(dir);
      int port;
      try (ServerSocket s = new ServerSocket(0)) {
        port = s.getLocalPort();
      }
      RestartablePostgres pg = new RestartablePostgres(dir, port);
      pg.start();
      pg.database().execute("ALTER USER postgres PASSWORD 'postgres'");
      return pg;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Starts the server on its data directory and port (initialising the cluster the first time). */
  public synchronized void start() {
    if (postgres != null) {
      return;
    }
    try {
      postgres =
          EmbeddedPostgres.builder()
              .setDataDirectory(dataDirectory)
              .setCleanDataDirectory(false)
              .setPort(port)
              .setPGStartupWait(Duration.ofSeconds(60))
              // Enough connections for two service replicas (20 reactive + 2 JDBC each), the
              // clients' pools and the test's own.
              .setServerConfig("max_connections", "300")
              .start();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /**
   * Stops the server (fast shutdown: open sessions are ended, committed data stays). The data
   * directory and the port are kept for {@link #start()}.
   */
  public synchronized void stop() {
    if (postgres == null) {
      return;
    }
    try {
      postgres.close();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } finally {
      postgres = null;
    }
  }

  public synchronized boolean running() {
    return postgres != null;
  }

  public int port() {
    return port;
  }

  /** A handle on this server that stays valid across restarts; closing it does not stop it. */
  public TestDatabase database() {
    return TestDatabase.of(
        "jdbc:postgresql://127.0.0.1:" + port + "/postgres",
        "postgres",
        "postgres",
        "restartable embedded PostgreSQL (" + dataDirectory + ")");
  }

  @Override
  public void close() {
    stop();
  }

  private static void deleteRecursively(Path dir) throws IOException {
    if (!Files.exists(dir)) {
      return;
    }
    try (Stream<Path> paths = Files.walk(dir)) {
      for (Path p : paths.sorted(Comparator.reverseOrder()).toList()) {
        Files.delete(p);
      }
    }
  }
}
