package dev.rollcall.bench;

import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Instance;
import io.vertx.core.Vertx;
import io.vertx.core.VertxOptions;
import io.vertx.core.buffer.Buffer;
import io.vertx.core.http.HttpClient;
import io.vertx.core.http.HttpClientOptions;
import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.RequestOptions;
import java.net.URI;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.function.BiConsumer;

/**
 * Simulated instances' heartbeats, sent the way the load benchmark sends them ({@link
 * LoadBenchmarkIT}: open loop, from a random phase, over a light HTTP client that keeps its
 * connections), and an idle fleet built from them: instances registered in one namespace after its
 * boot pass was worked to its end, that heartbeat with an empty in-flight set, as an idle client's
 * session does, and do nothing else ({@link RestBenchmarkIT}).
 */
final class SimulatedFleet implements AutoCloseable {

  private final int size;
  private final String namespace;
  private final long periodMs;
  private final Vertx vertx;
  private final ScheduledExecutorService timer;
  // Beats due from the first element to the second are sent; all of them while the fleet runs.
  private final AtomicLongArray window =
      new AtomicLongArray(new long[] {Long.MIN_VALUE, Long.MAX_VALUE});
  private final AtomicLong answered = new AtomicLong();
  private final Map<String, AtomicLong> errors = new ConcurrentHashMap<>();

  private SimulatedFleet(int size, String namespace, long periodMs) {
    this.size = size;
    this.namespace = namespace;
    this.periodMs = periodMs;
    this.vertx = Vertx.vertx(new VertxOptions().setEventLoopPoolSize(1));
    this.timer = Executors.newScheduledThreadPool(2);
  }

  /**
   * {@code size} instances of {@code namespace}'s deployment {@code deploymentId}, registered 16 at
   * a time, each heartbeating every {@code periodMs} until closed. The deployment's boot pass is
   * worked to its end first by an instance that then leaves, so that the fleet is idle: no pass
   * waits for it.
   */
  static SimulatedFleet idle(
      URI base, String namespace, String deploymentId, int size, long periodMs) throws Exception {
    SimulatedFleet fleet = new SimulatedFleet(size, namespace, periodMs);
    if (size == 0) {
      return fleet;
    }
    Api api = new Api(base);
    Instance drainer = api.register(namespace, deploymentId, "idle-pass");
    api.drain(drainer, 500);
    api.leave(drainer).expect(204);
    HttpClient http =
        fleet.vertx.createHttpClient(
            new HttpClientOptions()
                .setDefaultHost(base.getHost())
                .setDefaultPort(base.getPort())
                .setKeepAlive(true)
                .setKeepAliveTimeout(0)
                .setMaxPoolSize(64)
                .setMaxWaitQueueSize(-1));
    Buffer body = Buffer.buffer("{\"inFlight\":[]}");
    ExecutorService registrars = Executors.newFixedThreadPool(16);
    try {
      List<Future<?>> registered = new ArrayList<>();
      for (int n = 0; n < size; n++) {
        int me = n;
        registered.add(
            registrars.submit(
                () -> {
                  Instance instance = api.register(namespace, deploymentId, "idle-" + me);
                  RequestOptions beat = heartbeat(instance);
                  openLoop(
                      fleet.timer,
                      periodMs,
                      fleet.window,
                      (due, counted) ->
                          http.request(beat)
                              .compose(
                                  r -> r.send(body).compose(a -> a.body().map(b -> a.statusCode())))
                              .onComplete(
                                  reply -> {
                                    if (reply.failed()) {
                                      fleet.error(reply.cause().getClass().getSimpleName());
                                    } else if (reply.result() != 200) {
                                      fleet.error(String.valueOf(reply.result()));
                                    } else {
                                      fleet.answered.incrementAndGet();
                                    }
                                  }));
                  return null;
                }));
      }
      for (Future<?> f : registered) {
        f.get();
      }
    } catch (Exception e) {
      fleet.close();
      throw e;
    } finally {
      registrars.shutdown();
    }
    return fleet;
  }

  /** Heartbeats answered 200 so far. */
  long answered() {
    return answered.get();
  }

  /** Heartbeats that failed or were not answered 200 so far. */
  long errors() {
    return errors.values().stream().mapToLong(AtomicLong::get).sum();
  }

  /** "1000 idle instances of ns0, a heartbeat every 3000 ms each: 20000 answered, errors none". */
  String describe() {
    Map<String, Long> byKind = new TreeMap<>();
    errors.forEach((k, v) -> byKind.put(k, v.get()));
    return String.format(
        "%d idle instances of %s, a heartbeat every %d ms each: %d answered, errors %s",
        size, namespace, periodMs, answered(), byKind.isEmpty() ? "none" : byKind);
  }

  private void error(String kind) {
    errors.computeIfAbsent(kind, k -> new AtomicLong()).incrementAndGet();
  }

  /** Stops the heartbeats (the instances are not told: the service stops with them). */
  @Override
  public void close() {
    window.set(1, Long.MIN_VALUE);
    timer.shutdownNow();
    vertx.close();
  }

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
