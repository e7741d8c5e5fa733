package dev.rollcall.e2e;

import dev.rollcall.e2e.EndToEndIT.Cluster;
import dev.rollcall.testing.RestartablePostgres;
import dev.rollcall.testing.TestDatabase;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;

/**
 * Restarts the suite's PostgreSQL under a running cluster, as an operator would (a fast shutdown,
 * the server down for a while, started again on the same port and data), and plays the orchestrator
 * afterwards: an app replica that exited meanwhile is started again with the same deployment id, as
 * Kubernetes restarts a container whose process ended.
 */
final class DatabaseRestarts {

  private final RestartablePostgres postgres;
  private final Cluster cluster;
  private final int downMs;

  /** Replica name → the environment it was started with on top of the cluster's. */
  private final Map<String, Map<String, String>> overrides = new HashMap<>();

  /** Every app replica that exited by itself, in the order found. */
  final List<String> exitedByThemselves = new ArrayList<>();

  DatabaseRestarts(RestartablePostgres postgres, Cluster cluster, int downMs) {
    this.postgres = postgres;
    this.cluster = cluster;
    this.downMs = downMs;
  }

  /**
   * One restart: when it began (wall clock, ms), how long the database was down, and when it was up
   * again (the database's clock, as text).
   */
  record Restart(long stoppedAtMs, long downForMs, String upAt) {}

  /**
   * Starts one more app replica of the cluster with {@code overrides} (a new deployment id), which
   * {@link #replaceExited} restarts with the same.
   */
  ExampleApp.Replica start(Map<String, String> extra, boolean awaitRegistration)
      throws InterruptedException {
    ExampleApp.Replica r = cluster.start(extra, awaitRegistration);
    overrides.put(r.name(), extra);
    return r;
  }

  /**
   * Starts one more app replica with {@code extra} on another thread; {@link #adopt} counts it
   * among the cluster's once it is up.
   */
  CompletableFuture<ExampleApp.Replica> launch(Map<String, String> extra) {
    return CompletableFuture.supplyAsync(
        () -> {
          try {
            return cluster.launch(extra);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
          }
        });
  }

  /**
   * Counts the replica {@code launched} started among the cluster's; one that failed to start (it
   * exited with the database while it booted) is started again, as an orchestrator would.
   */
  ExampleApp.Replica adopt(
      CompletableFuture<ExampleApp.Replica> launched, Map<String, String> extra)
      throws InterruptedException {
    try {
      ExampleApp.Replica r = launched.join();
      r.process().onExit(t -> cluster.endedAt.putIfAbsent(r.name(), t));
      overrides.put(r.name(), extra);
      cluster.adopt(r);
      return r;
    } catch (CompletionException e) {
      System.out.printf("  a replica that was booting did not start (%s): started again%n", e);
      exitedByThemselves.add("a booting replica");
      return start(extra, true);
    }
  }

  /**
   * Stops PostgreSQL, keeps it down for the configured time and starts it again; returns once it is
   * up. {@link #replaceExited} then plays the orchestrator.
   */
  Restart restart() throws InterruptedException {
    for (ExampleApp.Replica r : cluster.live) {
      // A delivery of a replica that exits ends with it, not when the harness next looks.
      r.process().onExit(t -> cluster.endedAt.putIfAbsent(r.name(), t));
    }
    long stoppedAt = System.currentTimeMillis();
    postgres.stop();
    long left = stoppedAt + downMs - System.currentTimeMillis();
    if (left > 0) {
      Thread.sleep(left);
    }
    postgres.start();
    long downFor = System.currentTimeMillis() - stoppedAt;
    TestDatabase db = cluster.db;
    String upAt = db.column("SELECT pg_postmaster_start_time()::text").get(0);
    return new Restart(stoppedAt, downFor, upAt);
  }

  /**
   * Replaces every live replica whose process has ended, with the environment it had; returns the
   * names of those replaced.
   */
  List<String> replaceExited() throws InterruptedException {
    List<String> exited = new ArrayList<>();
    for (ExampleApp.Replica r : List.copyOf(cluster.live)) {
      if (!r.process().isAlive()) {
        cluster.live.remove(r);
        cluster.endedAt.putIfAbsent(r.name(), System.currentTimeMillis());
        exited.add(r.name());
        Map<String, String> extra = overrides.getOrDefault(r.name(), Map.of());
        start(extra, true);
      }
    }
    exitedByThemselves.addAll(exited);
    return exited;
  }
}
