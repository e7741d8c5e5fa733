package dev.rollcall.bench;

import dev.rollcall.testing.Api.Instance;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.RequestOptions;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.function.BiConsumer;

/**
 * Simulated instances' heartbeats, sent the way the load benchmark sends them ({@link
 * LoadBenchmarkIT}: open loop, from a random phase, over a light HTTP client that keeps its
 * connections).
 */
final class SimulatedFleet {

  private SimulatedFleet() {}

  /** An instance's heartbeat request (its body is the caller's), with a 30 s timeout. */
  static RequestOptions heartbeat(Instance instance) {
    return new RequestOptions()
        .setMethod(HttpMethod.POST)
        .setURI("/instances/" + instance.id() + "/heartbeat")
        .putHeader("Authorization", "Bearer " + instance.token())
        .putHeader("Content-Type", "application/json")
        .setTimeout(30_000);
  }

  /**
   * Sends something every {@code everyMs} from a random phase, open loop: each send is due at a
   * fixed time whatever the ones before it are doing, and is told that time and whether it falls
   * inside the measured window (sends due after the window are not made).
   */
  static void openLoop(
      ScheduledExecutorService timer,
      long everyMs,
      AtomicLongArray window,
      BiConsumer<Long, Boolean> send) {
    long first = System.nanoTime() + ThreadLocalRandom.current().nextLong(everyMs) * 1_000_000;
    AtomicLong k = new AtomicLong();
    timer.scheduleAtFixedRate(
        () -> {
          long due = first + k.getAndIncrement() * everyMs * 1_000_000;
          if (due <= window.get(1)) {
            send.accept(due, due >= window.get(0));
          }
        },
        Math.max(0, first - System.nanoTime()),
        everyMs * 1_000_000,
        TimeUnit.NANOSECONDS);
  }
}
