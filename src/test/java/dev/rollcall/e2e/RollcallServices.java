package dev.rollcall.e2e;

import dev.rollcall.testing.ServiceProcess;
import dev.rollcall.testing.TcpBalancer;
import dev.rollcall.testing.TestDatabase;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;

/**
 * Rollcall for the end-to-end suites: packaged service replicas behind one TCP balancer, serving
 * the suite's {@code world-postgres} namespace, and the environment that wires an example app
 * replica to them.
 */
final class RollcallServices implements AutoCloseable {

  static final String NAMESPACE = "e2e";
  static final String SECRET = "e2e-secret";

  private final TestDatabase db;
  private final Map<String, String> config = new HashMap<>();
  private final TcpBalancer balancer;
  private final List<ServiceProcess> services = new ArrayList<>();
  private final String deploymentId = "deploy-" + UUID.randomUUID();
  private int started;

  private RollcallServices(TestDatabase db) throws IOException {
    this.db = db;
    String ns = "rollcall.namespaces.\"" + NAMESPACE + "\".";
    config.put(ns + "registration-secret", SECRET);
    config.put(ns + "source.kind", "world-postgres");
    this.balancer = new TcpBalancer();
  }

  /**
   * The settings of a second {@code world-postgres} namespace, {@code namespace}, whose runs and
   * queue live in {@code db}, known to the service as database {@code name}: given to {@link
   * #start(TestDatabase, int, Map)} beside the suite's own namespace on the default database.
   */
  static Map<String, String> namespaceIn(String namespace, String name, TestDatabase db) {
    String ns = "rollcall.namespaces.\"" + namespace + "\".";
    String d = "rollcall.databases.\"" + name + "\".";
    return Map.of(
        ns + "registration-secret",
        SECRET,
        ns + "source.kind",
        "world-postgres",
        ns + "database",
        name,
        d + "url",
        db.reactiveUrl(),
        d + "username",
        db.user(),
        d + "password",
        db.password());
  }

  /** Starts {@code replicas} service replicas behind the balancer. */
  static RollcallServices start(TestDatabase db, int replicas)
      throws IOException, InterruptedException {
    return start(db, replicas, Map.of());
  }

  /**
   * As {@link #start(TestDatabase, int)}, every replica (those {@link #startOne} adds later too)
   * also given {@code settings}: tracing's, say.
   */
  static RollcallServices start(TestDatabase db, int replicas, Map<String, String> settings)
      throws IOException, InterruptedException {
    RollcallServices out = new RollcallServices(db);
    out.config.putAll(settings);
    try {
      for (int i = 0; i < replicas; i++) {
        out.startOne();
      }
      return out;
    } catch (IOException | InterruptedException | RuntimeException e) {
      out.close();
      throw e;
    }
  }

  /** Starts one more service replica and puts it behind the balancer once it is ready. */
  void startOne() throws IOException, InterruptedException {
    startOne(java.time.Duration.ofSeconds(90));
  }

  /** As {@link #startOne()}, waiting at most {@code readyWithin} (a busy machine starts slowly). */
  void startOne(java.time.Duration readyWithin) throws IOException, InterruptedException {
    ServiceProcess p = ServiceProcess.start("e2e-rollcall-" + started++, db, config, readyWithin);
    services.add(p);
    balancer.add(p.base());
  }

  /** Kills the oldest service replica (SIGKILL), after taking it out of the balancer. */
  void killOne() throws InterruptedException {
    ServiceProcess dead = services.remove(0);
    balancer.remove(dead.base());
    dead.kill();
  }

  /**
   * Stops every service replica (SIGTERM, each taken out of the balancer first): Rollcall is away,
   * and its address refuses connections until {@link #startOne} brings a replica back.
   */
  void stopAll() throws InterruptedException {
    while (!services.isEmpty()) {
      ServiceProcess p = services.remove(0);
      balancer.remove(p.base());
      p.close();
    }
  }

  /** The balancer in front of the service replicas: the address app replicas are given. */
  java.net.URI url() {
    return balancer.url();
  }

  /** The deployment id app replicas are given by {@link #appEnv}. */
  String deploymentId() {
    return deploymentId;
  }

  /**
   * The environment of an app replica that recovers through these replicas: {@code recovery} {@code
   * world} (the zero-code world module {@code targetWorld}) or {@code rollcall} (the client's
   * programmatic API).
   */
  Map<String, String> appEnv(String recovery, String targetWorld) {
    return appEnv(recovery, targetWorld, NAMESPACE);
  }

  /** As {@link #appEnv(String, String)}, for an app of {@code namespace} ({@link #namespaceIn}). */
  Map<String, String> appEnv(String recovery, String targetWorld, String namespace) {
    Map<String, String> env = new HashMap<>();
    env.put("E2E_RECOVERY", recovery);
    env.put("ROLLCALL_URL", balancer.url().toString());
    env.put("ROLLCALL_NAMESPACE", namespace);
    env.put("ROLLCALL_SECRET", SECRET);
    env.put("ROLLCALL_DEPLOYMENT_ID", deploymentId);
    if (recovery.equals("world")) {
      env.put("WORKFLOW_TARGET_WORLD", targetWorld);
    }
    return env;
  }

  /** Each running service replica's readiness: its HTTP status, or why it could not be read. */
  List<String> readiness() {
    List<String> out = new ArrayList<>();
    for (ServiceProcess p : services) {
      try {
        var client = java.net.http.HttpClient.newHttpClient();
        var response =
            client.send(
                java.net.http.HttpRequest.newBuilder(p.managementBase().resolve("/q/health/ready"))
                    .timeout(java.time.Duration.ofSeconds(5))
                    .build(),
                java.net.http.HttpResponse.BodyHandlers.ofString());
        out.add(String.valueOf(response.statusCode()));
      } catch (IOException e) {
        out.add("not read (" + e + ")");
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        out.add("interrupted");
      }
    }
    return out;
  }

  /** The sum of a counter over the running service replicas, or why it could not be read. */
  String counter(String name) {
    try {
      double sum = 0;
      for (ServiceProcess p : services) {
        sum += p.metrics(name, List.of()).values().stream().mapToDouble(Double::doubleValue).sum();
      }
      return String.format("%.0f", sum);
    } catch (RuntimeException e) {
      return "not read (" + e.getMessage() + ")";
    }
  }

  @Override
  public void close() throws InterruptedException {
    for (ServiceProcess p : services) {
      p.close();
    }
    services.clear();
    try {
      balancer.close();
    } catch (IOException e) {
      System.out.printf("  could not close the balancer: %s%n", e);
    }
  }
}
