package dev.rollcall.upgrade;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * The release a rolling upgrade starts from, built from its commit: {@code
 * -Dupgrade.previous=<commit or tag>}, or by default the parent of the newest commit that added a
 * migration (the last code that did not know the newest migration). Its sources are exported
 * ({@code git archive}) to {@code target/upgrade/<commit id>/src} and packaged there; a marker file
 * keeps the build for the next run, so a second run does not build it again.
 */
final class PreviousRelease {

  static final String MIGRATIONS = "src/main/resources/db/migration";
  static final String PROPERTIES = "src/main/resources/application.properties";
  static final String IGNORE_FUTURE = "quarkus.flyway.ignore-future-migrations=true";

  final String commit;
  final Path app;
  final int newestMigration;

  /**
   * Whether its build starts on a schema with migrations it does not ship ({@code
   * quarkus.flyway.ignore-future-migrations=true} in its {@code application.properties}): the
   * releases before that setting need it on their command line.
   */
  final boolean ignoresFutureMigrations;

  final boolean builtNow;
  final double buildSeconds;

  private PreviousRelease(String commit, Path app, Path src, boolean builtNow, double buildSeconds)
      throws IOException {
    this.commit = commit;
    this.app = app;
    this.newestMigration = newestMigration(src.resolve(MIGRATIONS));
    this.ignoresFutureMigrations =
        Files.readAllLines(src.resolve(PROPERTIES)).stream()
            .map(String::strip)
            .anyMatch(IGNORE_FUTURE::equals);
    this.builtNow = builtNow;
    this.buildSeconds = buildSeconds;
  }

  /** Resolves the previous release and builds its jar unless an earlier run did. */
  static PreviousRelease build() throws IOException, InterruptedException {
    String asked = System.getProperty("upgrade.previous", "");
    String commit =
        asked.isBlank()
            ? git(
                "rev-parse",
                git("log", "-1", "--diff-filter=A", "--format=%H", "HEAD", "--", MIGRATIONS) + "^")
            : git("rev-parse", asked + "^{commit}");
    Path dir = Path.of("target", "upgrade", commit);
    Path src = dir.resolve("src");
    Path app = src.resolve("target").resolve("quarkus-app");
    Path built = dir.resolve("built");
    long t0 = System.nanoTime();
    boolean builtNow = !Files.exists(built);
    if (builtNow) {
      deleteTree(src);
      Files.createDirectories(src);
      Path archive = dir.resolve("src.tar");
      run(
          dir.resolve("archive.log"),
          Path.of("."),
          "git",
          "archive",
          "-o",
          archive.toString(),
          commit);
      run(dir.resolve("archive.log"), src, "tar", "-xf", archive.toAbsolutePath().toString());
      Files.delete(archive);
      // Offline first (the previous release's dependencies are nearly always this build's); with
      // the registry if one it needs is not in the local repository.
      List<String> mvn =
          List.of("./mvnw", "-B", "-q", "package", "-DskipTests", "-Dspotless.check.skip=true");
      List<String> offline = new ArrayList<>(mvn);
      offline.add(1, "-o");
      if (run(dir.resolve("build.log"), src, offline.toArray(String[]::new)) != 0
          && run(dir.resolve("build.log"), src, mvn.toArray(String[]::new)) != 0) {
        throw new IllegalStateException(
            "the previous release " + commit + " did not build: see " + dir.resolve("build.log"));
      }
      Files.writeString(built, commit + "\n");
    }
    return new PreviousRelease(commit, app, src, builtNow, (System.nanoTime() - t0) / 1e9);
  }

  /** The highest version among the Flyway migrations {@code V<n>__*.sql} in a directory. */
  static int newestMigration(Path migrations) throws IOException {
    try (Stream<Path> files = Files.list(migrations)) {
      return files
          .map(p -> p.getFileName().toString())
          .filter(n -> n.matches("V[0-9]+__.*\\.sql"))
          .mapToInt(n -> Integer.parseInt(n.substring(1, n.indexOf("__"))))
          .max()
          .orElse(0);
    }
  }

  private static String git(String... args) throws IOException, InterruptedException {
    List<String> command = new ArrayList<>(List.of("git"));
    command.addAll(List.of(args));
    Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
    if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0 || out.isEmpty()) {
      throw new IllegalStateException(
          "git "
              + String.join(" ", args)
              + " found no commit (a clone with its history is needed;"
              + " or say -Dupgrade.previous=<commit>): "
              + out);
    }
    return out;
  }

  /** Runs a command in {@code dir}, its output appended to {@code log}; its exit code. */
  private static int run(Path log, Path dir, String... command)
      throws IOException, InterruptedException {
    ProcessBuilder b =
        new ProcessBuilder(command).directory(dir.toFile()).redirectErrorStream(true);
    // The outer build's wrapper exports where its project is: the inner one must find its own.
    b.environment().remove("MAVEN_PROJECTBASEDIR");
    b.environment().remove("MAVEN_CMD_LINE_ARGS");
    b.redirectOutput(ProcessBuilder.Redirect.appendTo(log.toAbsolutePath().toFile()));
    Process p = b.start();
    if (!p.waitFor(20, TimeUnit.MINUTES)) {
      p.destroyForcibly();
      return -1;
    }
    return p.exitValue();
  }

  private static void deleteTree(Path root) throws IOException {
    if (!Files.exists(root)) {
      return;
    }
    try (Stream<Path> all = Files.walk(root)) {
      all.sorted(java.util.Comparator.reverseOrder()).map(Path::toFile).forEach(File::delete);
    }
  }
}
