package dev.rollcall.testing;

import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.testcontainers.DockerClientFactory;
import org.testcontainers.postgresql.PostgreSQLContainer;

/**
 * A real PostgreSQL for tests, found in this order: an explicit URL from the environment ({@code
 * ROLLCALL_TEST_JDBC_URL}, with {@code ROLLCALL_TEST_DB_USER} and {@code
 * ROLLCALL_TEST_DB_PASSWORD}), else a Testcontainers container when Docker is available, else an
 * embedded PostgreSQL. Tests never skip for lack of a database.
 */
public final class TestDatabase implements AutoCloseable {

  private final String jdbcUrl;
  private final String user;
  private final String password;
  private final AutoCloseable owner;
  private final String origin;

  private TestDatabase(
      String jdbcUrl, String user, String password, AutoCloseable owner, String origin) {
    this.jdbcUrl = jdbcUrl;
    this.user = user;
    this.password = password;
    this.owner = owner;
    this.origin = origin;
  }

  /**
   * The PostgreSQL major the build asks for (system property {@code postgres.test-major}, set by
   * the pom: 17, or an older one under a {@code -Ppg13}…{@code pg16} profile, which also picks the
   * embedded binaries of that major).
   */
  public static int requestedMajor() {
    return Integer.getInteger("postgres.test-major", 17);
  }

  /** Starts or connects to a database. */
  public static TestDatabase start() {
    String url = System.getenv("ROLLCALL_TEST_JDBC_URL");
    if (url != null && !url.isBlank()) {
      return new TestDatabase(
          url,
          System.getenv().getOrDefault("ROLLCALL_TEST_DB_USER", "postgres"),
          System.getenv().getOrDefault("ROLLCALL_TEST_DB_PASSWORD", "postgres"),
          () -> {},
          "ROLLCALL_TEST_JDBC_URL");
    }
    if (dockerAvailable()) {
      PostgreSQLContainer container =
          new PostgreSQLContainer("postgres:" + requestedMajor() + "-alpine");
      container.start();
      return new TestDatabase(
          container.getJdbcUrl(),
          container.getUsername(),
          container.getPassword(),
          container::stop,
          "Testcontainers");
    }
    try {
      EmbeddedPostgres pg = EmbeddedPostgres.builder().start();
      TestDatabase db =
          new TestDatabase(
              "jdbc:postgresql://localhost:" + pg.getPort() + "/postgres",
              "postgres",
              "postgres",
              pg,
              "embedded PostgreSQL");
      db.execute("ALTER USER postgres PASSWORD 'postgres'");
      return db;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /**
   * A database someone else owns and stops (a {@link RestartablePostgres}, say): closing this
   * handle leaves the database running.
   */
  public static TestDatabase of(String jdbcUrl, String user, String password, String origin) {
    return new TestDatabase(jdbcUrl, user, password, () -> {}, origin);
  }

  private static boolean dockerAvailable() {
    try {
      return DockerClientFactory.instance().isDockerAvailable();
    } catch (RuntimeException | LinkageError e) {
      return false;
    }
  }

  public String jdbcUrl() {
    return jdbcUrl;
  }

  /** The same database as a Vert.x reactive URL. */
  public String reactiveUrl() {
    return jdbcUrl.substring("jdbc:".length());
  }

  public String user() {
    return user;
  }

  public String password() {
    return password;
  }

  /** Where the database came from, for logs. */
  public String origin() {
    return origin;
  }

  /** The Quarkus datasource settings that point at this database. */
  public Map<String, String> quarkusSettings() {
    return Map.of(
        "quarkus.datasource.jdbc.url", jdbcUrl,
        "quarkus.datasource.reactive.url", reactiveUrl(),
        "quarkus.datasource.username", user,
        "quarkus.datasource.password", password);
  }

  /** A new JDBC connection. */
  public Connection connect() throws SQLException {
    return DriverManager.getConnection(jdbcUrl, user, password);
  }

  /** Runs statements in one connection. */
  public void execute(String... statements) {
    try (Connection c = connect();
        var s = c.createStatement()) {
      for (String sql : statements) {
        s.execute(sql);
      }
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
  }

  /** The id of the boot pass of {@code deploy} in {@code namespace}, once one opened (polled). */
  public long awaitBootPass(String namespace, String deploy, Duration within) {
    return Poll.value(
        "a boot pass of deploy " + deploy,
        within,
        () ->
            column(
                    "SELECT id FROM rollcall.epochs WHERE namespace = ? AND kind = 'boot'"
                        + " AND deployment_id = ?",
                    namespace,
                    deploy)
                .stream()
                .findFirst()
                .map(Long::parseLong));
  }

  /** The first column of every row; a {@code String[]} parameter is bound as a text array. */
  public List<String> column(String sql, Object... params) {
    return query(
        sql,
        params,
        rs -> {
          List<String> out = new ArrayList<>();
          while (rs.next()) {
            out.add(rs.getString(1));
          }
          return out;
        });
  }

  /** Every row, each as its columns' text. */
  public List<List<String>> rows(String sql, Object... params) {
    return query(
        sql,
        params,
        rs -> {
          List<List<String>> out = new ArrayList<>();
          int columns = rs.getMetaData().getColumnCount();
          while (rs.next()) {
            List<String> row = new ArrayList<>(columns);
            for (int i = 1; i <= columns; i++) {
              row.add(rs.getString(i));
            }
            out.add(row);
          }
          return out;
        });
  }

  /** Every column of the single row the query returns. */
  public List<String> row(String sql, Object... params) {
    return query(
        sql,
        params,
        rs -> {
          if (!rs.next()) {
            throw new IllegalStateException("no row for " + sql);
          }
          List<String> out = new ArrayList<>();
          for (int i = 1; i <= rs.getMetaData().getColumnCount(); i++) {
            out.add(rs.getString(i));
          }
          if (rs.next()) {
            throw new IllegalStateException("more than one row for " + sql);
          }
          return out;
        });
  }

  /** Runs one update; returns the rows it changed. */
  public int update(String sql, Object... params) {
    try (Connection c = connect();
        PreparedStatement s = c.prepareStatement(sql)) {
      bind(c, s, params);
      return s.executeUpdate();
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
  }

  private interface Reader<T> {
    T read(ResultSet rs) throws SQLException;
  }

  private <T> T query(String sql, Object[] params, Reader<T> reader) {
    try (Connection c = connect();
        PreparedStatement s = c.prepareStatement(sql)) {
      bind(c, s, params);
      try (ResultSet rs = s.executeQuery()) {
        return reader.read(rs);
      }
    } catch (SQLException e) {
      throw new IllegalStateException(sql, e);
    }
  }

  private static void bind(Connection c, PreparedStatement s, Object[] params) throws SQLException {
    for (int i = 0; i < params.length; i++) {
      if (params[i] instanceof String[] strings) {
        s.setArray(i + 1, c.createArrayOf("text", strings));
      } else {
        s.setObject(i + 1, params[i]);
      }
    }
  }

  @Override
  public void close() {
    try {
      owner.close();
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }
}
