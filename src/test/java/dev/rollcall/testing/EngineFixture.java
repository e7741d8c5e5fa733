package dev.rollcall.testing;

import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The workflow engine ({@code @workflow/world-postgres}) and its queue ({@code graphile-worker}) as
 * the npm packages pinned in {@code src/test/engine/package-lock.json}, installed under {@code
 * target/engine-fixture/}, so that tests build the engine's schemas with the packages' own
 * migrations rather than with a copy of them.
 *
 * <p>Needs {@code node} and {@code npm} on the {@code PATH} and the npm registry reachable the
 * first time; later runs reuse the installed {@code node_modules} while the lockfile is unchanged.
 * Paths are relative to the working directory, which is the project root under Maven.
 */
public final class EngineFixture {

  /** The pinned package manifest and lockfile, kept in the repository. */
  private static final Path SOURCE = Path.of("src", "test", "engine");

  /** Where the packages are installed; never committed. */
  private static final Path DIR = Path.of("target", "engine-fixture");

  /** The engine's own setup program, the package's {@code bin.bootstrap}. */
  private static final String SETUP_SCRIPT = "node_modules/@workflow/world-postgres/bin/setup.js";

  private static final long NPM_TIMEOUT_MINUTES = 10;
  private static final long SETUP_TIMEOUT_MINUTES = 2;
  private static final int LOG_TAIL_LINES = 60;

  private static final boolean WINDOWS =
      System.getProperty("os.name", "").toLowerCase(Locale.ROOT).startsWith("windows");

  private EngineFixture() {}

  /**
   * Installs the pinned packages into {@code target/engine-fixture/}, unless an earlier install of
   * the same lockfile is already there, and returns that directory. npm's output goes to {@code
   * target/engine-fixture/npm.log}.
   *
   * <p>This is {@code npm install --no-save}, not {@code npm ci}: the registry these machines reach
   * does not serve the optional platform binaries of {@code cbor-extract} (a dependency of {@code
   * cbor-x}), so the lockfile made here lacks them, and {@code npm ci} refuses any lockfile that
   * lacks an optional package it cannot fetch. {@code npm install} with the lockfile present
   * installs exactly the locked versions, checked against the locked integrity hashes, skips the
   * missing optional packages, and with {@code --no-save} writes nothing back.
   *
   * @throws IllegalStateException when npm fails, with the tail of its log
   */
  public static synchronized Path install() {
    try {
      Files.createDirectories(DIR);
      byte[] lock = Files.readAllBytes(SOURCE.resolve("package-lock.json"));
      byte[] manifest = Files.readAllBytes(SOURCE.resolve("package.json"));
      Path installedLock = DIR.resolve("package-lock.json");
      boolean upToDate =
          Files.exists(DIR.resolve("node_modules").resolve(".package-lock.json"))
              && Files.exists(installedLock)
              && Arrays.equals(lock, Files.readAllBytes(installedLock));
      if (upToDate) {
        return DIR;
      }
      Files.write(DIR.resolve("package.json"), manifest);
      Files.copy(
          SOURCE.resolve("package-lock.json"), installedLock, StandardCopyOption.REPLACE_EXISTING);
      Path log = DIR.resolve("npm.log");
      int exit =
          run(
              List.of(executable("npm"), "install", "--no-save", "--no-audit", "--no-fund"),
              Map.of(),
              log,
              NPM_TIMEOUT_MINUTES);
      if (exit != 0) {
        // A failed install must not look finished to the next run.
        Files.deleteIfExists(installedLock);
        throw new IllegalStateException(
            "npm install in "
                + DIR
                + " exited with "
                + exit
                + "; tail of "
                + log
                + ":\n"
                + tail(log));
      }
      return DIR;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /**
   * Creates the engine's schemas in the given database with the package's own setup program: the
   * drizzle migrations of schema {@code workflow} (bookkeeping in {@code workflow_drizzle}) and
   * graphile-worker's migrations of schema {@code graphile_worker}. Running it again on the same
   * database changes nothing. The program's output goes to {@code target/engine-fixture/setup.log}.
   *
   * @throws IllegalStateException when the setup program fails, with its output
   */
  public static void setUpSchemas(TestDatabase db) {
    Path dir = install();
    Path log = dir.resolve("setup.log");
    int exit;
    try {
      exit =
          run(
              List.of(executable("node"), SETUP_SCRIPT),
              Map.of("WORKFLOW_POSTGRES_URL", postgresUrl(db.jdbcUrl(), db.user(), db.password())),
              log,
              SETUP_TIMEOUT_MINUTES);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    if (exit != 0) {
      throw new IllegalStateException(
          "the engine's setup ("
              + SETUP_SCRIPT
              + ") against "
              + db.jdbcUrl()
              + " exited with "
              + exit
              + ":\n"
              + tail(log));
    }
  }

  /**
   * The database as a libpq-style URL for node-postgres: {@code jdbc:postgresql://host:port/db}
   * becomes {@code postgres://user:password@host:port/db}. JDBC query parameters are dropped: they
   * are the JDBC driver's, not node-postgres'.
   */
  static String postgresUrl(String jdbc, String user, String password) {
    if (!jdbc.startsWith("jdbc:postgresql://")) {
      throw new IllegalArgumentException("not a PostgreSQL JDBC URL: " + jdbc);
    }
    URI uri = URI.create(jdbc.substring("jdbc:".length()));
    String host = uri.getHost() == null ? "localhost" : uri.getHost();
    String port = uri.getPort() < 0 ? "" : ":" + uri.getPort();
    String path = uri.getRawPath() == null ? "" : uri.getRawPath();
    return "postgres://" + encode(user) + ":" + encode(password) + "@" + host + port + path;
  }

  private static String encode(String s) {
    // URLEncoder is for forms: a space would become '+', which a URL's userinfo reads literally.
    return URLEncoder.encode(s, StandardCharsets.UTF_8).replace("+", "%20");
  }

  /** Runs a command in {@link #DIR}, its output in {@code log}, and returns its exit code. */
  private static int run(List<String> command, Map<String, String> env, Path log, long minutes)
      throws IOException {
    ProcessBuilder pb =
        new ProcessBuilder(command)
            .directory(DIR.toFile())
            .redirectErrorStream(true)
            .redirectOutput(log.toFile());
    pb.environment().putAll(env);
    Process p = pb.start();
    try {
      if (!p.waitFor(minutes, TimeUnit.MINUTES)) {
        p.destroyForcibly();
        throw new IllegalStateException(
            String.join(" ", command)
                + " did not finish in "
                + minutes
                + " minutes; tail of "
                + log
                + ":\n"
                + tail(log));
      }
      return p.exitValue();
    } catch (InterruptedException e) {
      p.destroyForcibly();
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while running " + command.get(0), e);
    }
  }

  /** The absolute path of a program found on the {@code PATH}. */
  private static String executable(String name) {
    List<String> candidates = WINDOWS ? List.of(name + ".cmd", name + ".exe") : List.of(name);
    String path = System.getenv().getOrDefault("PATH", "");
    for (String entry : path.split(File.pathSeparator)) {
      if (entry.isEmpty()) {
        continue;
      }
      for (String candidate : candidates) {
        Path file = Path.of(entry, candidate);
        if (Files.isRegularFile(file) && Files.isExecutable(file)) {
          return file.toAbsolutePath().toString();
        }
      }
    }
    throw new IllegalStateException(
        name + " is not on the PATH; the engine fixture needs Node.js 20 or later with npm");
  }

  private static String tail(Path log) {
    try {
      List<String> lines =
          new String(Files.readAllBytes(log), StandardCharsets.UTF_8).lines().toList();
      return String.join(
          "\n", lines.subList(Math.max(0, lines.size() - LOG_TAIL_LINES), lines.size()));
    } catch (IOException e) {
      return "(no log: " + e.getMessage() + ")";
    }
  }
}
