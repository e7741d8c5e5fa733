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
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The workflow engine ({@code @workflow/world-postgres}) and its queue ({@code graphile-worker}) as
 * the npm packages pinned for an {@link EngineVersion} (manifest and lockfile in {@code
 * src/test/<dir>/}), installed under {@code target/<dir>-fixture/}, so that tests build the
 * engine's schemas with the packages' own migrations rather than with a copy of them, and enqueue
 * runs with the engine's own queue code. The methods without a version use {@link
 * EngineVersion#STABLE}.
 *
 * <p>Needs {@code node} and {@code npm} on the {@code PATH} and the npm registry reachable the
 * first time; later runs reuse the installed {@code node_modules} while the lockfile is unchanged.
 * Paths are relative to the working directory, which is the project root under Maven.
 */
public final class EngineFixture {

  /** The engine's own setup program, the package's {@code bin.bootstrap}. */
  private static final String SETUP_SCRIPT = "node_modules/@workflow/world-postgres/bin/setup.js";

  /**
   * Enqueues one run's workflow message with the installed engine's queue; serves every version (it
   * resolves the packages from its working directory).
   */
  private static final Path ENQUEUE_SCRIPT =
      Path.of("src", "test", "engine", "scripts", "enqueue-run.mjs");

  /** The engine's settings that a test must set explicitly rather than inherit. */
  private static final List<String> ENGINE_ENVIRONMENT =
      List.of(
          "WORKFLOW_POSTGRES_URL",
          "DATABASE_URL",
          "WORKFLOW_POSTGRES_JOB_PREFIX",
          "WORKFLOW_QUEUE_NAMESPACE",
          "WORKFLOW_LOCAL_BASE_URL",
          "PORT");

  /** All of an install's attempts together; one attempt normally takes a minute or two. */
  private static final long NPM_TIMEOUT_MINUTES = 20;

  /**
   * npm install, tried again on network failures; the one script every install here goes through.
   */
  private static final Path NPM_INSTALL = Path.of("src", "test", "npm-install.mjs");

  private static final long SETUP_TIMEOUT_MINUTES = 2;
  private static final long ENQUEUE_TIMEOUT_MINUTES = 2;
  private static final int LOG_TAIL_LINES = 60;

  private static final boolean WINDOWS =
      System.getProperty("os.name", "").toLowerCase(Locale.ROOT).startsWith("windows");

  private EngineFixture() {}

  /** {@link #install(EngineVersion)} of {@link EngineVersion#STABLE}. */
  public static Path install() {
    return install(EngineVersion.STABLE);
  }

  /**
   * Installs a version's pinned packages into its {@link EngineVersion#installDir()}, unless an
   * earlier install of the same manifest and lockfile is already there, and returns that directory.
   * npm's output goes to {@code npm.log} there.
   *
   * <p>This is {@code npm install --no-save}, not {@code npm ci}: the registry these machines reach
   * does not serve the optional platform binaries of {@code cbor-extract} (a dependency of {@code
   * cbor-x}), so the lockfiles made here lack them, and {@code npm ci} refuses any lockfile that
   * lacks an optional package it cannot fetch. {@code npm install} with the lockfile present
   * installs exactly the locked versions, checked against the locked integrity hashes, skips the
   * missing optional packages, and with {@code --no-save} writes nothing back.
   *
   * @throws IllegalStateException when npm fails, with the tail of its log, or installs another
   *     engine version than the one pinned
   */
  public static synchronized Path install(EngineVersion version) {
    try {
      Path source = version.sourceDir();
      Path dir = version.installDir();
      Files.createDirectories(dir);
      Files.write(dir.resolve("package.json"), Files.readAllBytes(source.resolve("package.json")));
      Files.write(
          dir.resolve("package-lock.json"),
          Files.readAllBytes(source.resolve("package-lock.json")));
      installPackage(dir);
      String installed = installedEngineVersion(dir);
      if (!version.packageVersion().equals(installed)) {
        throw new IllegalStateException(
            dir
                + " holds @workflow/world-postgres "
                + installed
                + ", not the pinned "
                + version.packageVersion());
      }
      return dir;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /**
   * Installs the packages of the npm project in {@code dir} (its {@code package.json} and {@code
   * package-lock.json}) into its own {@code node_modules}, the way {@link #install(EngineVersion)}
   * explains, unless that manifest and lockfile were installed there before. npm's output goes to
   * {@code node_modules/npm.log}. npm runs through {@code src/test/npm-install.mjs}, which tries it
   * again when it failed on the network (a registry connection cut off mid-download, say).
   */
  public static synchronized void installPackage(Path dir) {
    try {
      byte[] lock = Files.readAllBytes(dir.resolve("package-lock.json"));
      byte[] manifest = Files.readAllBytes(dir.resolve("package.json"));
      // Written only after npm succeeded, so an interrupted install never looks finished.
      Path modules = dir.resolve("node_modules");
      Path marker = modules.resolve(".rollcall-installed.sha256");
      String fingerprint = sha256(lock, manifest);
      if (Files.exists(marker)
          && fingerprint.equals(Files.readString(marker, StandardCharsets.UTF_8))) {
        return;
      }
      Files.createDirectories(modules);
      Files.deleteIfExists(marker);
      Path log = Files.createTempFile("npm-install", ".log");
      int exit =
          run(
              dir,
              List.of(executable("node"), NPM_INSTALL.toAbsolutePath().toString(), "--no-save"),
              Map.of(),
              log,
              NPM_TIMEOUT_MINUTES);
      if (exit != 0) {
        throw new IllegalStateException(
            "npm install in " + dir + " exited with " + exit + "; npm's output:\n" + tail(log));
      }
      Files.move(log, modules.resolve("npm.log"), StandardCopyOption.REPLACE_EXISTING);
      Files.writeString(marker, fingerprint, StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static String sha256(byte[]... parts) {
    try {
      MessageDigest digest = MessageDigest.getInstance("SHA-256");
      for (byte[] part : parts) {
        digest.update(part);
        digest.update((byte) 0);
      }
      return HexFormat.of().formatHex(digest.digest());
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  private static String installedEngineVersion(Path dir) throws IOException {
    Path manifest =
        dir.resolve("node_modules")
            .resolve("@workflow")
            .resolve("world-postgres")
            .resolve("package.json");
    if (!Files.exists(manifest)) {
      return "(none)";
    }
    return Api.JSON.readTree(manifest.toFile()).path("version").asText("(none)");
  }

  /** {@link #setUpSchemas(TestDatabase, EngineVersion)} with {@link EngineVersion#STABLE}. */
  public static void setUpSchemas(TestDatabase db) {
    setUpSchemas(db, EngineVersion.STABLE);
  }

  /**
   * Creates a version's schemas in the given database with the package's own setup program: the
   * drizzle migrations of schema {@code workflow} (bookkeeping in {@code workflow_drizzle}) and
   * graphile-worker's migrations of schema {@code graphile_worker}. Running it again on the same
   * database changes nothing. The program's output goes to {@code setup.log} in the install
   * directory.
   *
   * @throws IllegalStateException when the setup program fails, with its output
   */
  public static void setUpSchemas(TestDatabase db, EngineVersion version) {
    Path dir = install(version);
    Path log = dir.resolve("setup.log");
    int exit;
    try {
      exit =
          run(
              dir,
              List.of(executable("node"), SETUP_SCRIPT),
              Map.of("WORKFLOW_POSTGRES_URL", postgresUrl(db)),
              log,
              SETUP_TIMEOUT_MINUTES);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    if (exit != 0) {
      throw new IllegalStateException(
          "the engine's setup ("
              + version.packageVersion()
              + ", "
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
   * Enqueues a run's workflow message as the engine does on its own (the call {@code
   * reenqueueActiveRuns} makes for every active run when a world starts): {@code
   * world.queue("__wkf_workflow_<name>", {runId})} of the installed package, under the default job
   * prefix and no queue namespace. No worker is started.
   *
   * @return the message id, which is also the graphile job's key
   */
  public static String enqueueAsEngine(
      TestDatabase db, EngineVersion version, String runId, String workflowName) {
    return enqueueAsEngine(db, version, runId, workflowName, null, null);
  }

  /**
   * {@link #enqueueAsEngine(TestDatabase, EngineVersion, String, String)} with the engine's {@code
   * WORKFLOW_POSTGRES_JOB_PREFIX} and {@code WORKFLOW_QUEUE_NAMESPACE} (each null for unset).
   *
   * @throws IllegalStateException when the script fails, with its output
   */
  public static String enqueueAsEngine(
      TestDatabase db,
      EngineVersion version,
      String runId,
      String workflowName,
      String jobPrefix,
      String queueNamespace) {
    Path dir = install(version);
    Map<String, String> env = new HashMap<>();
    env.put("WORKFLOW_POSTGRES_URL", postgresUrl(db));
    if (jobPrefix != null) {
      env.put("WORKFLOW_POSTGRES_JOB_PREFIX", jobPrefix);
    }
    if (queueNamespace != null) {
      env.put("WORKFLOW_QUEUE_NAMESPACE", queueNamespace);
    }
    List<String> command =
        List.of(
            executable("node"), ENQUEUE_SCRIPT.toAbsolutePath().toString(), runId, workflowName);
    try {
      Path log = Files.createTempFile(dir, "enqueue-", ".log");
      int exit = run(dir, command, env, log, ENQUEUE_TIMEOUT_MINUTES);
      String output = Files.readString(log, StandardCharsets.UTF_8);
      String last = output.lines().reduce((a, b) -> b).orElse("");
      if (exit != 0 || !last.startsWith("{")) {
        throw new IllegalStateException(
            "enqueueing "
                + runId
                + " with the engine "
                + version.packageVersion()
                + " (node "
                + ENQUEUE_SCRIPT
                + " in "
                + dir
                + ") exited with "
                + exit
                + ":\n"
                + output);
      }
      Files.delete(log);
      return Api.JSON.readTree(last).path("messageId").asText();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** The test database as node-postgres reaches it. */
  public static String postgresUrl(TestDatabase db) {
    return postgresUrl(db.jdbcUrl(), db.user(), db.password());
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

  /**
   * Runs a command in {@code dir}, its output in {@code log}, and returns its exit code. The
   * engine's settings come from {@code env} only, never from the environment Maven runs in.
   */
  public static int run(
      Path dir, List<String> command, Map<String, String> env, Path log, long minutes)
      throws IOException {
    ProcessBuilder pb =
        new ProcessBuilder(command)
            .directory(dir.toFile())
            .redirectErrorStream(true)
            .redirectOutput(log.toFile());
    pb.environment().keySet().removeAll(ENGINE_ENVIRONMENT);
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
  public static String executable(String name) {
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

  public static String tail(Path log) {
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
