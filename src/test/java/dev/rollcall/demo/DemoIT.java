package dev.rollcall.demo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The demo as a newcomer meets it: the README's run command (the packaged jar with the demo flag
 * and no database settings), its first screen, and the README's tour, block by block, against it.
 */
class DemoIT {

  static final Path APP = Path.of(System.getProperty("rollcall.app.dir", "target/quarkus-app"));
  static final Path README = Path.of("README.md");
  static final String TOUR = "## A tour of the demo";

  /** A log record's first line: date, time, level. */
  static final Pattern RECORD = Pattern.compile("^\\d{4}-\\d\\d-\\d\\d \\S+ +([A-Z]+) .*");

  static Process demo;
  static int httpPort;
  static List<String> firstScreen;

  @BeforeAll
  static void startTheDemo() throws Exception {
    int[] ports = freePorts();
    httpPort = ports[0];
    Path log = Path.of("target", "it-logs", "demo.log");
    Files.createDirectories(log.getParent());
    Files.deleteIfExists(log);
    ProcessBuilder builder =
        new ProcessBuilder(
            Path.of(System.getProperty("java.home"), "bin", "java").toString(),
            "-Drollcall.demo=true",
            "-Dquarkus.http.port=" + ports[0],
            "-Dquarkus.management.port=" + ports[1],
            "-jar",
            APP.resolve("quarkus-run.jar").toString());
    // As on a newcomer's machine: no database, namespace or log settings from the environment.
    builder
        .environment()
        .keySet()
        .removeIf(k -> k.startsWith("QUARKUS_") || k.startsWith("ROLLCALL_"));
    demo = builder.redirectErrorStream(true).redirectOutput(log.toFile()).start();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(180);
    while (true) {
      List<String> lines = Files.readAllLines(log, StandardCharsets.UTF_8);
      if (lines.stream().anyMatch(l -> l.startsWith("  Stop "))) {
        firstScreen = lines;
        break;
      }
      assertTrue(demo.isAlive(), () -> "the demo exited:\n" + String.join("\n", lines));
      assertTrue(
          System.nanoTime() < deadline,
          () -> "no banner within 180 s:\n" + String.join("\n", lines));
      Thread.sleep(200);
    }
    Files.write(Path.of("target", "it-logs", "demo-first-screen.txt"), firstScreen);
  }

  @AfterAll
  static void stopTheDemo() throws InterruptedException {
    if (demo != null) {
      demo.destroy();
      if (!demo.waitFor(30, TimeUnit.SECONDS)) {
        demo.destroyForcibly().waitFor();
      }
    }
  }

  @Test
  void theFirstScreenIsShortQuietAndEndsWithTheConsoleTheTokenAndARequestToTry() {
    String screen = String.join("\n", firstScreen);
    System.out.println("The demo's first screen:\n" + screen);
    int listening = -1;
    for (int i = 0; i < firstScreen.size(); i++) {
      if (firstScreen.get(i).contains("Listening on:")) {
        listening = i;
        break;
      }
    }
    assertTrue(listening >= 0, () -> "no 'Listening on' line:\n" + screen);
    int linesBeforeReady = listening + 1;
    assertTrue(linesBeforeReady <= 15, () -> linesBeforeReady + " lines until ready:\n" + screen);

    List<String> lastTen =
        firstScreen.subList(Math.max(0, firstScreen.size() - 10), firstScreen.size());
    String end = String.join("\n", lastTen);
    assertTrue(end.contains("Console      http://localhost:" + httpPort + "/"), end);
    assertTrue(end.matches("(?s).*Admin token  demo-admin-[0-9a-f]{32}.*"), end);
    assertTrue(
        end.contains("Try          curl -s -X POST localhost:" + httpPort + "/instances"), end);
    assertTrue(end.contains("Stop         Ctrl+C"), end);

    List<String> loud = new ArrayList<>();
    for (String line : firstScreen) {
      Matcher record = RECORD.matcher(line);
      boolean quiet =
          record.matches()
              ? List.of("INFO", "DEBUG", "TRACE").contains(record.group(1))
              : line.startsWith("  "); // a continuation of the banner
      if (!quiet) {
        loud.add(line);
      }
    }
    assertEquals(List.of(), loud, "lines above INFO, or output that is no log record");
  }

  @Test
  void theReadmeTourRunsAgainstTheDemoAndAnswersAsItSays() throws Exception {
    List<String> blocks = tourBlocks(Files.readAllLines(README));
    assertTrue(blocks.size() >= 5, "the tour's shell blocks: " + blocks.size());
    String script =
        String.join("\n", blocks)
            .replace("localhost:8080", "localhost:" + httpPort)
            // A refused request fails the tour instead of printing a problem document.
            .replace("curl -s ", "curl -sS --fail-with-body ");
    Path file = Path.of("target", "it-logs", "demo-tour.sh");
    Files.writeString(file, script);
    ProcessBuilder tour = new ProcessBuilder("bash", "-euo", "pipefail", file.toString());
    tour.environment().put("ADMIN_TOKEN", adminToken());
    Process p = tour.redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(p.waitFor(120, TimeUnit.SECONDS), "the tour did not end");
    System.out.println("The tour's output:\n" + out);
    assertEquals(0, p.exitValue(), () -> "the tour failed:\n" + out);
    List<String> missing = new ArrayList<>();
    for (String expected : promisedPairs(blocks)) {
      if (!out.contains(expected)) {
        missing.add(expected);
      }
    }
    assertEquals(List.of(), missing, () -> "answers the README promises, not seen in:\n" + out);
  }

  /** The shell blocks of the README's tour section, in order. */
  static List<String> tourBlocks(List<String> readme) {
    int start = readme.indexOf(TOUR);
    assertTrue(start >= 0, "the README's tour section");
    List<String> blocks = new ArrayList<>();
    StringBuilder block = null;
    for (String line : readme.subList(start + 1, readme.size())) {
      if (block == null && line.startsWith("## ")) {
        break;
      }
      if (block == null && line.equals("```sh")) {
        block = new StringBuilder();
      } else if (block != null && line.equals("```")) {
        blocks.add(block.toString());
        block = null;
      } else if (block != null) {
        block.append(line).append('\n');
      }
    }
    return blocks;
  }

  /**
   * The {@code "key":"value"} pairs of the answers the tour shows in its comments ({@code # {…}}),
   * but for values it elides ({@code …}).
   */
  static Set<String> promisedPairs(List<String> blocks) {
    Pattern pair = Pattern.compile("\"[A-Za-z]+\":\"[^\"…]*\"");
    Set<String> pairs = new LinkedHashSet<>();
    for (String block : blocks) {
      for (String line : block.split("\n")) {
        if (line.startsWith("# {")) {
          Matcher m = pair.matcher(line);
          while (m.find()) {
            pairs.add(m.group());
          }
        }
      }
    }
    return pairs;
  }

  private static String adminToken() {
    Pattern token = Pattern.compile("Admin token  (demo-admin-[0-9a-f]{32})");
    for (String line : firstScreen) {
      Matcher m = token.matcher(line);
      if (m.find()) {
        return m.group(1);
      }
    }
    throw new AssertionError("no admin token on the first screen");
  }

  private static int[] freePorts() throws IOException {
    try (ServerSocket a = new ServerSocket(0);
        ServerSocket b = new ServerSocket(0)) {
      return new int[] {a.getLocalPort(), b.getLocalPort()};
    }
  }
}
