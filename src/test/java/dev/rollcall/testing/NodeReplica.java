package dev.rollcall.testing;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Predicate;

/**
 * One application replica ({@code bench/replica.mjs}) as its own Node.js process: the engine with
 * its own boot recovery ({@code mode=engine}) or with the Rollcall client ({@code mode=rollcall}).
 * Its JSON lines are collected as events; its stderr goes to {@code target/it-logs/<name>.log}.
 */
public final class NodeReplica implements AutoCloseable {

  /** The bench package: {@code bench/} of this repository. */
  public static final Path BENCH = Path.of(System.getProperty("rollcall.bench.dir", "bench"));

  /** A loopback port nobody listens on: the engine's workers wait there and never run a job. */
  private static final int CLOSED_PORT = closedPort();

  private final String name;
  private final Process process;
  private final List<JsonNode> events = new ArrayList<>();
  private final long startedNanos = System.nanoTime();
  private boolean drained; // guarded by events: stdout closed, every line read

  private NodeReplica(String name, Process process) {
    this.name = name;
    this.process = process;
    Thread reader =
        new Thread(
            () -> {
              try (BufferedReader in =
                  new BufferedReader(
                      new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
                for (String line; (line = in.readLine()) != null; ) {
                  JsonNode event;
                  try {
                    event = Api.JSON.readTree(line);
                  } catch (IOException notJson) {
                    event = Api.JSON.createObjectNode().put("event", "text").put("line", line);
                  }
                  synchronized (events) {
                    events.add(event);
                    events.notifyAll();
                  }
                }
              } catch (IOException closed) {
                // the process ended
              }
              synchronized (events) {
                drained = true;
                events.notifyAll();
              }
            },
            "replica-" + name);
    reader.setDaemon(true);
    reader.start();
  }

  /** Installs the bench package's npm dependencies (once per lockfile) into {@code bench/}. */
  public static void install() {
    EngineFixture.installPackage(BENCH);
  }

  /**
   * Starts a replica. {@code config} is what {@code bench/replica.mjs} documents; {@code dbUrl} is
   * filled in from {@code db}.
   */
  public static NodeReplica start(String name, TestDatabase db, Map<String, Object> config) {
    try {
      Map<String, Object> all = new java.util.LinkedHashMap<>(config);
      all.putIfAbsent("dbUrl", EngineFixture.postgresUrl(db));
      all.putIfAbsent("name", name);
      Path logs = Path.of("target", "it-logs");
      Files.createDirectories(logs);
      ProcessBuilder pb =
          new ProcessBuilder(
                  EngineFixture.executable("node"),
                  BENCH.resolve("replica.mjs").toAbsolutePath().toString())
              .redirectError(
                  ProcessBuilder.Redirect.appendTo(logs.resolve(name + ".log").toFile()));
      pb.environment().put("ROLLCALL_BENCH_REPLICA", Api.JSON.writeValueAsString(all));
      pb.environment().put("WORKFLOW_LOCAL_BASE_URL", "http://127.0.0.1:" + CLOSED_PORT);
      pb.environment().remove("WORKFLOW_POSTGRES_URL");
      return new NodeReplica(name, pb.start());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /**
   * Starts another Node.js program as a replica: {@code node <script>} in {@code dir} with {@code
   * env} added to this process's environment. Its stdout lines are collected as events like a bench
   * replica's; its stderr goes to {@code target/it-logs/<name>.log}.
   */
  public static NodeReplica startProgram(
      String name, Path dir, String script, Map<String, String> env) {
    try {
      Path logs = Path.of("target", "it-logs");
      Files.createDirectories(logs);
      ProcessBuilder pb =
          new ProcessBuilder(EngineFixture.executable("node"), script)
              .directory(dir.toFile())
              .redirectError(
                  ProcessBuilder.Redirect.appendTo(logs.resolve(name + ".log").toFile()));
      pb.environment().remove("WORKFLOW_POSTGRES_URL");
      pb.environment().remove("WORKFLOW_LOCAL_BASE_URL");
      pb.environment().putAll(env);
      return new NodeReplica(name, pb.start());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  public String name() {
    return name;
  }

  public long pid() {
    return process.pid();
  }

  public boolean isAlive() {
    return process.isAlive();
  }

  /** Sends one line on the replica's stdin ({@code go}, {@code leave}). */
  public void send(String line) {
    try {
      OutputStream in = process.getOutputStream();
      in.write((line + "\n").getBytes(StandardCharsets.UTF_8));
      in.flush();
    } catch (IOException e) {
      throw new UncheckedIOException(name + " does not listen any more", e);
    }
  }

  /** Every event so far. */
  public List<JsonNode> events() {
    synchronized (events) {
      return List.copyOf(events);
    }
  }

  /** Every event so far named {@code event}. */
  public List<JsonNode> events(String event) {
    return events().stream().filter(e -> event.equals(e.path("event").asText())).toList();
  }

  /**
   * Waits for the first event named {@code event} that matches {@code test}.
   *
   * @throws IllegalStateException when the replica exits first or the time runs out
   */
  public JsonNode await(String event, Predicate<JsonNode> test, Duration timeout)
      throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    synchronized (events) {
      for (; ; ) {
        Optional<JsonNode> hit =
            events.stream()
                .filter(e -> event.equals(e.path("event").asText()) && test.test(e))
                .findFirst();
        if (hit.isPresent()) {
          return hit.get();
        }
        if (drained) {
          throw new IllegalStateException(
              name + " ended before '" + event + "' (see target/it-logs/" + name + ".log)");
        }
        long left = deadline - System.nanoTime();
        if (left <= 0) {
          throw new IllegalStateException(
              name + ": no '" + event + "' within " + timeout.toMillis() + " ms");
        }
        events.wait(Math.max(1, Math.min(left / 1_000_000, 500)));
      }
    }
  }

  /** Waits for the first event named {@code event}. */
  public JsonNode await(String event, Duration timeout) throws InterruptedException {
    return await(event, e -> true, timeout);
  }

  /** Waits for the process to end and returns its exit code. */
  public int waitFor(Duration timeout) throws InterruptedException {
    if (!process.waitFor(timeout.toMillis(), java.util.concurrent.TimeUnit.MILLISECONDS)) {
      throw new IllegalStateException(name + " still runs after " + timeout.toMillis() + " ms");
    }
    return process.exitValue();
  }

  /** Milliseconds since the process was started. */
  public long ageMillis() {
    return (System.nanoTime() - startedNanos) / 1_000_000;
  }

  /** Kills the process at once (SIGKILL), as a crash would, and waits for it to end. */
  public void kill() throws InterruptedException {
    process.destroyForcibly();
    process.waitFor();
  }

  /**
   * Asks the process to stop (SIGTERM), as an orchestrator does, without waiting for it. Through
   * its handle: {@code Process.destroy()} would also close our end of its stdout, and the process
   * would lose its last journal lines (and see EPIPE) while it shuts down.
   */
  public void terminate() {
    process.toHandle().destroy();
  }

  /** Calls {@code then} with the wall-clock time (ms) at which the process ended. */
  public void onExit(java.util.function.LongConsumer then) {
    process.onExit().thenRun(() -> then.accept(System.currentTimeMillis()));
  }

  @Override
  public void close() throws InterruptedException {
    if (process.isAlive()) {
      kill();
    }
  }

  private static int closedPort() {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
