package dev.rollcall.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileSystems;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code src/test/npm-install.mjs}, the one way this repository installs npm packages, run against
 * a stand-in {@code npm} on the {@code PATH} that fails the way the registry connection does (or
 * some other way) a given number of times, then succeeds. Without the retry, a registry connection
 * cut off mid-download fails the whole build (it did, once: {@code Invalid response body ...
 * ECONNABORTED}).
 */
class NpmInstallScriptTest {

  private static final String CUT_OFF =
      "npm error code ECONNABORTED\n"
          + "npm error syscall read\n"
          + "npm error errno ECONNABORTED\n"
          + "npm error Invalid response body while trying to fetch https://registry.npmjs.org/zod:"
          + " read ECONNABORTED\n";

  @TempDir Path dir;

  private record Outcome(int exit, List<String> calls, String output) {}

  /**
   * Runs the script with an {@code npm} that prints {@code failure} and exits with {@code code} on
   * its first {@code failures} calls, then succeeds. Each call's arguments are recorded.
   */
  private Outcome install(String failure, int code, int failures, int attempts)
      throws IOException, InterruptedException {
    Path bin = Files.createDirectories(dir.resolve("bin"));
    Path calls = dir.resolve("calls");
    Files.writeString(dir.resolve("failure"), failure, StandardCharsets.UTF_8);
    // The stand-in is a Node script behind a launcher named npm (npm.cmd on Windows), as the real
    // npm is found: it records its arguments, then fails as told or succeeds.
    Files.writeString(
        bin.resolve("npm.mjs"),
        "import { appendFileSync, readFileSync } from 'node:fs';\n"
            + "const calls = "
            + js(calls)
            + ";\n"
            + "appendFileSync(calls, process.argv.slice(2).join(' ') + '\\n');\n"
            + "const n = readFileSync(calls, 'utf8').trim().split('\\n').length;\n"
            + "if (n <= "
            + failures
            + ") { process.stderr.write(readFileSync("
            + js(dir.resolve("failure"))
            + ", 'utf8')); process.exit("
            + code
            + "); }\n"
            + "console.log('added 1 package');\n",
        StandardCharsets.UTF_8);
    Path npm = bin.resolve("npm");
    Files.writeString(
        npm, "#!/bin/sh\nexec node \"$(dirname \"$0\")/npm.mjs\" \"$@\"\n", StandardCharsets.UTF_8);
    if (FileSystems.getDefault().supportedFileAttributeViews().contains("posix")) {
      Files.setPosixFilePermissions(npm, PosixFilePermissions.fromString("rwxr-xr-x"));
    }
    Files.writeString(
        bin.resolve("npm.cmd"), "@node \"%~dp0npm.mjs\" %*\r\n", StandardCharsets.UTF_8);
    Path log = dir.resolve("out.log");
    ProcessBuilder pb =
        new ProcessBuilder(
                EngineFixture.executable("node"),
                Path.of("src", "test", "npm-install.mjs").toAbsolutePath().toString(),
                "--no-save")
            .directory(dir.toFile())
            .redirectErrorStream(true)
            .redirectOutput(log.toFile());
    pb.environment().put("PATH", bin + File.pathSeparator + System.getenv("PATH"));
    pb.environment().put("ROLLCALL_NPM_ATTEMPTS", Integer.toString(attempts));
    pb.environment().put("ROLLCALL_NPM_RETRY_DELAY_MS", "10");
    Process p = pb.start();
    assertTrue(p.waitFor(60, TimeUnit.SECONDS), "the script finished");
    return new Outcome(
        p.exitValue(),
        Files.exists(calls) ? Files.readAllLines(calls) : List.of(),
        Files.readString(log, StandardCharsets.UTF_8));
  }

  /** A path as a JavaScript string literal. */
  private static String js(Path path) {
    return "'" + path.toString().replace("\\", "\\\\").replace("'", "\\'") + "'";
  }

  @Test
  void aDownloadCutOffMidBodyIsTriedAgain() throws Exception {
    Outcome o = install(CUT_OFF, 1, 1, 4);
    assertEquals(0, o.exit(), o.output());
    assertEquals(
        List.of("install --no-audit --no-fund --no-save", "install --no-audit --no-fund --no-save"),
        o.calls());
    assertTrue(o.output().contains("failed on the network (ECONNABORTED)"), o.output());
  }

  @Test
  void aRegistryOverloadedOrOldNpmsWordingIsTriedAgain() throws Exception {
    assertEquals(
        0, install("npm error code E503\nnpm error 503 Service Unavailable\n", 1, 2, 4).exit());
    assertEquals(
        0, install("npm ERR! code ECONNRESET\nnpm ERR! network aborted\n", 1, 1, 4).exit());
  }

  @Test
  void aNetworkThatStaysDownGivesUpAfterTheLastAttemptWithNpmsExitCode() throws Exception {
    Outcome o = install(CUT_OFF, 7, 10, 3);
    assertEquals(7, o.exit(), o.output());
    assertEquals(3, o.calls().size(), "attempts");
    assertTrue(o.output().contains("3 times; giving up"), o.output());
  }

  @Test
  void aMissingPackageFailsAtOnce() throws Exception {
    Outcome o =
        install(
            "npm error code E404\nnpm error 404 Not Found - GET https://registry.npmjs.org/nope\n",
            1,
            1,
            4);
    assertEquals(1, o.exit());
    assertEquals(1, o.calls().size(), "attempts");
  }

  @Test
  void anInstallScriptThatMerelyPrintsANetworkCodeFailsAtOnce() throws Exception {
    Outcome o =
        install(
            "Error: connect ECONNREFUSED 127.0.0.1:5432\n"
                + "npm error code 1\n"
                + "npm error command failed\n",
            1,
            1,
            4);
    assertEquals(1, o.exit());
    assertEquals(1, o.calls().size(), "attempts");
  }
}
