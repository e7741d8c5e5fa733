package dev.rollcall.testing;

import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The packaged service ({@code target/quarkus-app/quarkus-run.jar}) started as its own process, as
 * an operator would run it, against a given database. Its output goes to {@code
 * target/it-logs/<name>.log}.
 */
public final class ServiceProcess implements AutoCloseable {

  private final String name;
  private final Process process;
  private final int httpPort;
  private final int managementPort;

  private ServiceProcess(String name, Process process, int httpPort, int managementPort) {
    this.name = name;
    this.process = process;
    this.httpPort = httpPort;
    this.managementPort = managementPort;
  }

  /** Starts a replica and waits (at most 90 s) until it is ready. */
  public static ServiceProcess start(String name, TestDatabase db, Map<String, String> settings)
      throws IOException, InterruptedException {
    return start(name, db, settings, Duration.ofSeconds(90));
  }

  /** Starts a replica and waits (at most {@code readyWithin}) until it is ready. */
  public static ServiceProcess start(
      String name, TestDatabase db, Map<String, String> settings, Duration readyWithin)
      throws IOException, InterruptedException {
    Path app = Path.of(System.getProperty("rollcall.app.dir", "target/quarkus-app"));
    return start(name, db, settings, readyWithin, app);
  }

  /**
   * As {@link #start(String, TestDatabase, Map, Duration)}, from the packaged application in {@code
   * app} (a {@code quarkus-app} directory): another release's build, for instance.
   */
  public static ServiceProcess start(
      String name, TestDatabase db, Map<String, String> settings, Duration readyWithin, Path app)
      throws IOException, InterruptedException {
    Path jar = app.resolve("quarkus-run.jar");
    if (!Files.exists(jar)) {
      throw new IllegalStateException(jar + " is missing: run through 'mvnw verify'");
    }
    int[] ports = freePorts(2);
    int http = ports[0];
    int management = ports[1];
    List<String> command = new ArrayList<>();
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    // The container image's JVM options and C library settings (src/main/docker/Dockerfile.jvm),
    // unless a benchmark tries others.
    ImageRuntime image = ImageRuntime.ofProject();
    String tried = System.getProperty("rollcall.service.jvm");
    if (tried == null) {
      command.addAll(image.jvmOptions());
    } else {
      for (String option : tried.split("\\s+")) {
        if (!option.isBlank()) {
          command.add(option);
        }
      }
    }
    command.add("-Dquarkus.http.port=" + http);
    command.add("-Dquarkus.management.port=" + management);
    db.quarkusSettings().forEach((k, v) -> command.add("-D" + k + "=" + v));
    settings.forEach((k, v) -> command.add("-D" + k + "=" + v));
    command.add("-jar");
    command.add(jar.toString());
    Path logs = Path.of("target", "it-logs");
    Files.createDirectories(logs);
    File log = logs.resolve(name + ".log").toFile();
    ProcessBuilder builder = new ProcessBuilder(command);
    // The image's C library settings, or those a benchmark tries instead (rollcall.service.env:
    // NAME=value pairs separated by spaces; empty for none).
    String triedEnv = System.getProperty("rollcall.service.env");
    if (triedEnv == null) {
      builder.environment().putAll(image.environment());
    } else {
      for (String pair : triedEnv.split("\\s+")) {
        if (!pair.isBlank()) {
          int eq = pair.indexOf('=');
          if (eq <= 0) {
            throw new IllegalArgumentException(
                "-Drollcall.service.env takes NAME=value pairs separated by spaces, not: " + pair);
          }
          builder.environment().put(pair.substring(0, eq), pair.substring(eq + 1));
        }
      }
    }
    Process p =
        builder
            .redirectErrorStream(true)
            .redirectOutput(ProcessBuilder.Redirect.appendTo(log))
            .start();
    ServiceProcess replica = new ServiceProcess(name, p, http, management);
    try {
      replica.awaitReady(readyWithin);
    } catch (RuntimeException | InterruptedException e) {
      // No caller holds the process yet to close it: left running, it would outlive the test.
      replica.close();
      throw e;
    }
    return replica;
  }

  private void awaitReady(Duration timeout) throws InterruptedException {
    Api management = new Api(URI.create("http://localhost:" + managementPort + "/"));
    long deadline = System.nanoTime() + timeout.toNanos();
    while (System.nanoTime() < deadline) {
      if (!process.isAlive()) {
        throw new IllegalStateException(name + " exited with " + process.exitValue());
      }
      try {
        if (management.send("GET", "q/health/ready", null, null).status() == 200) {
          return;
        }
      } catch (UncheckedIOException notYet) {
        // not listening yet
      }
      Thread.sleep(200);
    }
    throw new IllegalStateException(name + " was not ready within " + timeout);
  }

  /** Resident memory of the process in MiB, from /proc (Linux), or -1 when unknown. */
  public long residentMiB() {
    return statusMiB("VmRSS:");
  }

  /** The most resident memory the process has had, in MiB, from /proc (Linux), or -1. */
  public long peakResidentMiB() {
    return statusMiB("VmHWM:");
  }

  private long statusMiB(String field) {
    try {
      for (String line :
          Files.readAllLines(Path.of("/proc", String.valueOf(process.pid()), "status"))) {
        if (line.startsWith(field)) {
          return Long.parseLong(line.replaceAll("[^0-9]", "")) / 1024;
        }
      }
    } catch (IOException | RuntimeException e) {
      return -1;
    }
    return -1;
  }

  /**
   * CPU time (user + system) the process has used so far, in milliseconds, from /proc (Linux; at
   * the usual 100 clock ticks a second), or -1 when unknown.
   */
  public long cpuMillis() {
    return Cpu.of(process.pid());
  }

  /** Its live threads' CPU so far ({@link Cpu#threads}). */
  public java.util.Map<Long, Cpu.ThreadTime> threads() {
    return Cpu.threads(process.pid());
  }

  public long pid() {
    return process.pid();
  }

  /** The management interface's root (health, metrics). */
  public URI managementBase() {
    return URI.create("http://localhost:" + managementPort + "/");
  }

  /** The Prometheus metrics as a scrape reads them ({@code GET /q/metrics}, answered 200). */
  public String scrape() {
    return new Api(managementBase()).send("GET", "q/metrics", null, null).expect(200).raw();
  }

  /**
   * Every sample of the Prometheus metrics whose name starts with {@code prefix}, summed over
   * series that differ only in the labels not named in {@code keepLabels}: key {@code
   * name{label="value",...}} with the kept labels in the order given.
   */
  public Map<String, Double> metrics(String prefix, List<String> keepLabels) {
    Map<String, Double> out = new java.util.TreeMap<>();
    String text = scrape();
    for (String line : text.split("\n")) {
      if (!line.startsWith(prefix)) {
        continue;
      }
      int brace = line.indexOf('{');
      int space = line.lastIndexOf(' ');
      String name = brace < 0 ? line.substring(0, space) : line.substring(0, brace);
      StringBuilder key = new StringBuilder(name);
      if (brace >= 0) {
        String labels = line.substring(brace + 1, line.lastIndexOf('}'));
        StringBuilder kept = new StringBuilder();
        for (String label : keepLabels) {
          java.util.regex.Matcher m =
              java.util.regex.Pattern.compile("(?:^|,)" + label + "=\"([^\"]*)\"").matcher(labels);
          if (m.find()) {
            kept.append(kept.length() == 0 ? "" : ",")
                .append(label)
                .append("=\"")
                .append(m.group(1))
                .append('"');
          }
        }
        if (kept.length() > 0) {
          key.append('{').append(kept).append('}');
        }
      }
      out.merge(key.toString(), Double.parseDouble(line.substring(space + 1)), Double::sum);
    }
    return out;
  }

  /** The service's API root. */
  public URI base() {
    return URI.create("http://localhost:" + httpPort + "/");
  }

  /** Kills the process at once, as a crash would (SIGKILL). */
  public void kill() throws InterruptedException {
    process.destroyForcibly();
    process.waitFor();
  }

  @Override
  public void close() throws InterruptedException {
    if (process.isAlive()) {
      process.destroy();
      if (!process.waitFor(20, java.util.concurrent.TimeUnit.SECONDS)) {
        kill();
      }
    }
  }

  /**
   * {@code n} distinct ports free now. The sockets stay open until all are chosen: one closed
   * before the next is asked for can be handed out again, and a service given the same port for
   * HTTP and management never reports ready.
   */
  private static int[] freePorts(int n) throws IOException {
    List<ServerSocket> open = new ArrayList<>();
    try {
      int[] ports = new int[n];
      for (int i = 0; i < n; i++) {
        ServerSocket s = new ServerSocket(0);
        open.add(s);
        ports[i] = s.getLocalPort();
      }
      return ports;
    } finally {
      for (ServerSocket s : open) {
        s.close();
      }
    }
  }
}
