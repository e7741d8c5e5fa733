package dev.rollcall.upgrade;

import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Batch;
import dev.rollcall.testing.Api.Reply;
import dev.rollcall.testing.Poll;
import java.net.URI;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;

/**
 * Instances that work recovery passes as a client does: claim a batch, enqueue its runs (a pause of
 * {@link #pace} ms stands for the enqueue), complete it, until the service says done and {@code
 * keepLooking} says there is no more to wait for (a takeover may open after a pass is done). Each
 * has its own HTTP client, so its connection goes to a replica of its own through the balancer.
 */
final class Claimers {

  private final Requests requests;
  private final int maxRuns;
  private final BooleanSupplier keepLooking;
  private final ExecutorService threads = Executors.newCachedThreadPool();
  private final List<Future<?>> loops = new ArrayList<>();

  /** Runs handed out to these claimers, and how often each. */
  final Map<String, Integer> handedOut = new ConcurrentHashMap<>();

  final AtomicLong batches = new AtomicLong();
  final AtomicLong takeoverBatches = new AtomicLong();
  volatile long pace;

  Claimers(Requests requests, int maxRuns, long paceMs, BooleanSupplier keepLooking) {
    this.requests = requests;
    this.maxRuns = maxRuns;
    this.pace = paceMs;
    this.keepLooking = keepLooking;
  }

  /** Starts a claimer loop for a member of a fleet. */
  void start(URI address, Fleet fleet, Fleet.Member member) {
    Api api = new Api(address);
    loops.add(threads.submit(() -> loop(api, fleet, member)));
  }

  private void loop(Api api, Fleet fleet, Fleet.Member first) {
    Fleet.Member m = first;
    while (m != null) { // null: a registration failed (counted)
      Fleet.Member me = m;
      Reply r =
          requests.send(
              "claim", () -> api.claim(me.instance(), maxRuns), s -> s == 200 || s == 429);
      if (r != null && r.status() == 410) {
        // Declared dead (counted as an error): registers again, as the client does.
        m = fleet.rejoin(me);
        continue;
      }
      if (r == null || (r.status() != 200 && r.status() != 429)) {
        Poll.sleep(1_000); // counted as an error; a client would look again later
        continue;
      }
      if (r.status() == 429) {
        Poll.sleep(r.body().path("retryAfterMs").asLong(500));
        continue;
      }
      switch (r.text("status")) {
        case "batch" -> work(api, me, Api.batch(r.body().get("batch")));
        case "wait" -> Poll.sleep(r.body().path("retryAfterMs").asLong(500));
        case "done" -> {
          if (!keepLooking.getAsBoolean()) {
            return;
          }
          Poll.sleep(500);
        }
        default -> requests.unexpected("claim", new IllegalStateException(r.toString()));
      }
    }
  }

  private void work(Api api, Fleet.Member m, Batch b) {
    batches.incrementAndGet();
    if ("takeover".equals(b.json().path("epochKind").asText())) {
      takeoverBatches.incrementAndGet();
    }
    b.runIds().forEach(id -> handedOut.merge(id, 1, Integer::sum));
    if (pace > 0) {
      Poll.sleep(pace);
    }
    requests.send("complete", () -> api.complete(m.instance(), b, List.of()), s -> s == 200);
  }

  /** Waits until every loop has ended (each once the service said done and nothing is left). */
  void awaitDone(long seconds) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
    for (Future<?> f : loops) {
      f.get(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
    }
    threads.shutdown();
  }

  void stop() {
    threads.shutdownNow();
  }
}
