package dev.rollcall.testing;

import java.nio.file.Path;
import java.util.List;

/**
 * A version of the workflow engine ({@code @workflow/world-postgres}) that the tests install and
 * build schemas with. Each has its pinned {@code package.json} and lockfile under {@code
 * src/test/<dir>/} and is installed under {@code target/<dir>-fixture/}. Both build the schemas
 * {@code workflow} and {@code graphile_worker}, so two versions never share a database.
 */
public enum EngineVersion {

  /** The released engine: tasks {@code <prefix>flows} and {@code <prefix>steps}, spec 3. */
  STABLE("engine", "4.3.7", 3, List.of("flows", "steps")),

  /**
   * The 5.0 beta: one task {@code <prefix>flows} (steps run inline in the workflow handler or as
   * messages on the same task), spec 5. Its exact {@code @workflow/errors}, {@code utils}, {@code
   * world} and {@code world-local} pins (5.0.0-beta.13, .7, .23, .31) are not on the registry these
   * machines reach, so {@code src/test/engine-beta/package.json} overrides them with the nearest
   * later consistent set (.15, .8, .24, .33: what {@code world-local} 5.0.0-beta.33 depends on).
   * The engine package itself, its migrations and its queue code are exactly 5.0.0-beta.29.
   */
  BETA("engine-beta", "5.0.0-beta.29", 5, List.of("flows"));

  private final String dir;
  private final String packageVersion;
  private final int specVersion;
  private final List<String> taskSuffixes;

  EngineVersion(String dir, String packageVersion, int specVersion, List<String> taskSuffixes) {
    this.dir = dir;
    this.packageVersion = packageVersion;
    this.specVersion = specVersion;
    this.taskSuffixes = taskSuffixes;
  }

  /** The pinned manifest and lockfile, kept in the repository: {@code src/test/<dir>}. */
  public Path sourceDir() {
    return Path.of("src", "test", dir);
  }

  /** Where the packages are installed, never committed: {@code target/<dir>-fixture}. */
  public Path installDir() {
    return Path.of("target", dir + "-fixture");
  }

  /** The {@code @workflow/world-postgres} version installed. */
  public String packageVersion() {
    return packageVersion;
  }

  /**
   * The {@code SPEC_VERSION_CURRENT} of the version's {@code @workflow/world}: what the engine
   * writes into {@code spec_version} of the runs, events, steps, waits and hooks it creates.
   */
  public int specVersion() {
    return specVersion;
  }

  /** The graphile-worker task identifiers the engine's workers register under a job prefix. */
  public List<String> taskIdentifiers(String jobPrefix) {
    return taskSuffixes.stream().map(suffix -> jobPrefix + suffix).toList();
  }

  /** Whether the engine queues step messages on their own task ({@code <prefix>steps}). */
  public boolean hasStepTask() {
    return taskSuffixes.contains("steps");
  }
}
