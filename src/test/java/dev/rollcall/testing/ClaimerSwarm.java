package dev.rollcall.testing;

import dev.rollcall.testing.Api.Batch;
import dev.rollcall.testing.Api.Instance;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Many claimers started together, each looping claim → complete until done, as booting instances
 * do. Records what was handed out so tests can check the invariants.
 */
public final class ClaimerSwarm {

  /** A claimer: an instance and the client (and so the service replica) it talks to. */
  public record Claimer(Api api, Instance instance) {}

  /** What a swarm saw. */
  public record Outcome(
      Set<String> handedOut,
      List<String> duplicates,
      Set<Long> epochs,
      int batches,
      int claimersWithWork,
      long wallMillis) {}

  private ClaimerSwarm() {}

  /** Runs every claimer to completion and reports. */
  public static Outcome run(List<Claimer> claimers, int maxRuns) throws Exception {
    Set<String> handedOut = ConcurrentHashMap.newKeySet();
    List<String> duplicates = new ArrayList<>();
    Set<Long> epochs = ConcurrentHashMap.newKeySet();
    AtomicInteger batches = new AtomicInteger();
    CountDownLatch start = new CountDownLatch(1);
    ExecutorService threads = Executors.newFixedThreadPool(claimers.size());
    List<Future<Integer>> results = new ArrayList<>();
    for (Claimer claimer : claimers) {
      results.add(
          threads.submit(
              () -> {
                start.await();
                int mine = 0;
                for (Batch b;
                    (b = claimer.api().claimBatch(claimer.instance(), maxRuns)) != null; ) {
                  mine++;
                  batches.incrementAndGet();
                  epochs.add(b.epochId());
                  for (String id : b.runIds()) {
                    if (!handedOut.add(id)) {
                      synchronized (duplicates) {
                        duplicates.add(id);
                      }
                    }
                  }
                  claimer.api().complete(claimer.instance(), b, List.of()).expect(200);
                }
                return mine;
              }));
    }
    // Instances heartbeat while they recover, as real ones do on their own timer.
    ScheduledExecutorService heartbeats = Executors.newSingleThreadScheduledExecutor();
    // One failed heartbeat (a timeout under load) must not end them all: an exception thrown out
    // of a fixed-rate task cancels every later run, and every instance would then lose its lease.
    heartbeats.scheduleAtFixedRate(
        () ->
            claimers.forEach(
                c -> {
                  try {
                    c.api().heartbeat(c.instance());
                  } catch (RuntimeException e) {
                    // the next beat, 2 s later, renews the lease, as a real client's would
                  }
                }),
        0,
        2,
        TimeUnit.SECONDS);
    long t0 = System.nanoTime();
    start.countDown();
    int withWork = 0;
    try {
      for (Future<Integer> f : results) {
        if (f.get(10, TimeUnit.MINUTES) > 0) {
          withWork++;
        }
      }
    } finally {
      threads.shutdownNow();
      heartbeats.shutdownNow();
    }
    long wall = (System.nanoTime() - t0) / 1_000_000;
    return new Outcome(handedOut, duplicates, epochs, batches.get(), withWork, wall);
  }
}
