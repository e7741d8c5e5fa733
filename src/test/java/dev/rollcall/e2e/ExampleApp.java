package dev.rollcall.e2e;

import com.fasterxml.jackson.databind.JsonNode;
import dev.rollcall.testing.Api;
import dev.rollcall.testing.EngineFixture;
import dev.rollcall.testing.NodeReplica;
import dev.rollcall.testing.TestDatabase;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

/**
 * The example application of {@code e2e/app} (and its build for the 4.x line, {@code e2e/app-4.3}):
 * workflows built by the SDK's own {@code wf build}, served by its minimal HTTP server on
 * {@code @workflow/world-postgres}. Installs and builds it once, creates the engine's schemas with
 * the package's own bootstrap program, and starts its replicas as Node.js processes whose journal
 * lines (flow deliveries and step executions) are their events.
 */
final class ExampleApp {

  static final Path E2E = Path.of(System.getProperty("rollcall.e2e.dir", "e2e"));

  /** The workflows' sources, shared by both lines' builds. */
  private static final Path WORKFLOWS = E2E.resolve("app/workflows");

  /** An SDK line: where its build of the app lives, and its server's script from there. */
  enum Line {
    /** workflow 5.0.0-beta.35 on @workflow/world-postgres 5.0.0-beta.29 (ES module bundles). */
    BETA("5.0", E2E.resolve("app"), "server.mjs", ".well-known/workflow/v1/flow.mjs"),
    /** workflow 4.8.9 (npm latest) on @workflow/world-postgres 4.3.7 (CommonJS bundles). */
    STABLE("4.3", E2E.resolve("app-4.3"), "../app/server.mjs", ".well-known/workflow/v1/flow.js");

    final String label;
    final Path dir;
    final String server;
    final Path flow;

    Line(String label, Path dir, String server, String flow) {
      this.label = label;
      this.dir = dir;
      this.server = server;
      this.flow = dir.resolve(flow);
    }

    static Line of(String label) {
      for (Line l : values()) {
        if (l.label.equals(label)) {
          return l;
        }
      }
      throw new IllegalArgumentException("no SDK line " + label + ": 5.0 or 4.3");
    }
  }

  private ExampleApp() {}

  /**
   * npm install (once per lockfile) and {@code wf build} when the bundles are older than the code.
   */
  static synchronized void prepare(Line line) throws IOException {
    EngineFixture.installPackage(line.dir);
    if (!Files.exists(line.flow) || newest(WORKFLOWS).compareTo(modified(line.flow)) > 0) {
      run(line, List.of(EngineFixture.executable("npm"), "run", "build"), Map.of(), "wf-build");
    }
  }

  /** The engine's schemas in {@code db}, by world-postgres' own bootstrap program. */
  static void bootstrap(Line line, TestDatabase db) throws IOException {
    run(
        line,
        List.of(
            EngineFixture.executable("node"),
            line.dir
                .resolve("node_modules/@workflow/world-postgres/dist/cli.js")
                .toAbsolutePath()
                .toString()),
        Map.of("WORKFLOW_POSTGRES_URL", EngineFixture.postgresUrl(db)),
        "bootstrap");
  }

  /**
   * A running replica of the app, the port its server listens on, and an HTTP client of its own (a
   * port freed by a killed replica can be handed to the next one: a shared client's pooled
   * connection to the dead process would be reset).
   */
  record Replica(NodeReplica process, int port, HttpClient http) {

    String name() {
      return process.name();
    }

    /** Starts a workflow on this replica; returns its run id. */
    String start(String workflow, Object... args) {
      return post("/start", Map.of("workflow", workflow, "args", List.of(args)))
          .path("runId")
          .asText();
    }

    /** Resumes the run parked on a hook. */
    void resume(String token, Map<String, Object> payload) {
      post("/hooks/" + token, payload);
    }

    private JsonNode post(String path, Object body) {
      try {
        return post(path, body, 2);
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException(e);
      }
    }

    /**
     * Sends once more when the server closed a pooled connection without answering: Node's HTTP
     * server closes a keep-alive connection idle for 5 s, and a request the client sent on it just
     * then gets no bytes back (it was never read, so sending it again cannot do it twice).
     */
    private JsonNode post(String path, Object body, int tries)
        throws IOException, InterruptedException {
      try {
        return postOnce(path, body);
      } catch (IOException e) {
        if (tries > 1 && String.valueOf(e.getMessage()).contains("received no bytes")) {
          return post(path, body, tries - 1);
        }
        throw e;
      }
    }

    private JsonNode postOnce(String path, Object body) throws IOException, InterruptedException {
      HttpResponse<String> response =
          http.send(
              HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
                  .timeout(Duration.ofSeconds(30))
                  .header("content-type", "application/json")
                  .POST(HttpRequest.BodyPublishers.ofString(Api.JSON.writeValueAsString(body)))
                  .build(),
              HttpResponse.BodyHandlers.ofString());
      if (response.statusCode() != 200) {
        throw new IllegalStateException(
            name() + " " + path + ": " + response.statusCode() + " " + response.body());
      }
      return Api.JSON.readTree(response.body());
    }
  }

  /**
   * Starts a replica with {@code env} (recovery mode, Rollcall settings) on a free port and waits
   * until its server listens and its recovery wiring has started.
   */
  static Replica start(Line line, String name, TestDatabase db, Map<String, String> env)
      throws InterruptedException {
    int port = freePort();
    Map<String, String> all = new java.util.HashMap<>(env);
    all.put("PORT", String.valueOf(port));
    all.put("WORKFLOW_POSTGRES_URL", EngineFixture.postgresUrl(db));
    all.putIfAbsent("WORKFLOW_TARGET_WORLD", "@workflow/world-postgres");
    NodeReplica process = NodeReplica.startProgram(name, line.dir, line.server, all);
    process.await("started", Duration.ofSeconds(60));
    return new Replica(
        process, port, HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build());
  }

  private static void run(Line line, List<String> command, Map<String, String> env, String what)
      throws IOException {
    Path logs = Files.createDirectories(Path.of("target", "it-logs"));
    Path log = logs.resolve("e2e-" + line.label + "-" + what + ".log");
    int exit = EngineFixture.run(line.dir, command, env, log, 10);
    if (exit != 0) {
      throw new IllegalStateException(
          String.join(" ", command) + " exited with " + exit + ":\n" + EngineFixture.tail(log));
    }
  }

  private static FileTime newest(Path dir) throws IOException {
    try (Stream<Path> files = Files.walk(dir)) {
      return files
          .filter(Files::isRegularFile)
          .map(ExampleApp::modified)
          .max(FileTime::compareTo)
          .orElse(FileTime.fromMillis(0));
    }
  }

  private static FileTime modified(Path file) {
    try {
      return Files.getLastModifiedTime(file);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static int freePort() {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
