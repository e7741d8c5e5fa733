package dev.rollcall.metrics;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import jakarta.enterprise.context.ApplicationScoped;
import java.time.Duration;
import java.util.List;

/**
 * The counters and timers of recovery, named once. Gauges read from the database live in {@link
 * StateGauges}. Prometheus names: {@code rollcall_runs_total{namespace,verdict,reason}}, {@code
 * rollcall_batches_total{namespace,event}}, {@code rollcall_claim_seconds}, {@code
 * rollcall_heartbeat_seconds}, {@code rollcall_epoch_locks_total{namespace,how}}, {@code
 * rollcall_sweep_rate_limited_total}, {@code rollcall_claims_held{namespace}}, {@code
 * rollcall_namespace_info{namespace,classifies}}.
 *
 * <p>Counters appear when first incremented, and Prometheus' {@code increase()} cannot see the step
 * from no series to 1: the first refused batch or the first death a replica counts would go unseen
 * by an alert. {@link #publish} registers, at zero, the series the shipped alert rules watch, for
 * every configured namespace, when the service starts.
 */
@ApplicationScoped
public class RecoveryMetrics {

  /** Instances declared dead, tagged {@code namespace} and {@code proof}. */
  public static final String INSTANCES_DEAD = "rollcall.instances.dead";

  /** Queue locks released, tagged {@code namespace} and {@code reason}. */
  public static final String LOCKS_RELEASED = "rollcall.queue.locks.released";

  private final MeterRegistry registry;

  RecoveryMetrics(MeterRegistry registry) {
    this.registry = registry;
  }

  /**
   * Publishes a configured namespace: {@code rollcall_namespace_info} (always 1; {@code classifies}
   * says whether its source reads the engine's state, so that {@code unclassified} hand-outs are a
   * fault there and the rule of the generic {@code table} source elsewhere), and at zero the
   * counter series that alerts watch.
   */
  public void publish(String namespace, boolean classifies) {
    Gauge.builder("rollcall.namespace.info", () -> 1)
        .description("A configured namespace; classifies: its source reads the engine's state")
        .tag("namespace", namespace)
        .tag("classifies", Boolean.toString(classifies))
        .register(registry);
    runCounter(namespace, "handed-out", "unclassified");
    for (String event : List.of("leased", "expired", "refused")) {
      batchCounter(namespace, event);
    }
    // The proofs of Reaper.Proof and the reasons of Reason.OWNER_DEAD and ORPHANED_LOCK.
    for (String proof : List.of("session-lost", "lease-expired")) {
      Counter.builder(INSTANCES_DEAD)
          .description("Instances declared dead, by the proof the death rested on")
          .tag("namespace", namespace)
          .tag("proof", proof)
          .register(registry);
    }
    for (String reason : List.of("owner-dead", "orphaned-lock")) {
      registry.counter(LOCKS_RELEASED, "namespace", namespace, "reason", reason);
    }
  }

  /** Runs given a verdict: {@code handed-out}, {@code deferred} or {@code skipped}, by reason. */
  public void runs(String namespace, String verdict, String reason, long count) {
    if (count > 0) {
      runCounter(namespace, verdict, reason).increment(count);
    }
  }

  private Counter runCounter(String namespace, String verdict, String reason) {
    return Counter.builder("rollcall.runs")
        .description("Runs by verdict and reason")
        .tag("namespace", namespace)
        .tag("verdict", verdict)
        .tag("reason", reason)
        .register(registry);
  }

  /** A batch event: {@code leased}, {@code expired} (re-leased), {@code refused} (stale fence). */
  public void batch(String namespace, String event) {
    batchCounter(namespace, event).increment();
  }

  private Counter batchCounter(String namespace, String event) {
    return Counter.builder("rollcall.batches")
        .description("Batches leased, re-leased after their lease expired, and refused completes")
        .tag("namespace", namespace)
        .tag("event", event)
        .register(registry);
  }

  /**
   * Claims this service replica holds now for the namespace ({@code waitMs}), read from {@code
   * count} whenever the gauge is scraped; registered once per namespace.
   */
  public void heldClaims(String namespace, java.util.function.ToIntFunction<String> count) {
    io.micrometer.core.instrument.Gauge.builder(
            "rollcall.claims.held", namespace, count::applyAsInt)
        .description("Claims this replica holds waiting for work or for the pass to end")
        .tag("namespace", namespace)
        // The namespace string is the gauge's state: kept, not weakly referenced.
        .strongReference(true)
        .register(registry);
  }

  /** A claim's latency. */
  public void claim(String namespace, Duration took) {
    timer("rollcall.claim", "Claim latency", namespace).record(took);
  }

  /** A heartbeat's latency. */
  public void heartbeat(String namespace, Duration took) {
    timer("rollcall.heartbeat", "Heartbeat latency", namespace).record(took);
  }

  /** One heartbeat transaction, and how many heartbeats it renewed together. */
  public void heartbeatFlush(int beats) {
    io.micrometer.core.instrument.DistributionSummary.builder("rollcall.heartbeat.flush.beats")
        .description("Heartbeats renewed together in one transaction (rollcall.heartbeat-flushes)")
        .register(registry)
        .record(beats);
  }

  /**
   * A claim took an epoch's lock: {@code at-once} in its first transaction (the lock was free), or
   * {@code queued} after waiting its turn (another claimer held it, or was queued for it); or it
   * did not: {@code skipped}, its turn came after a claim ahead of it found the epoch closed.
   */
  public void epochLock(String namespace, String how) {
    Counter.builder("rollcall.epoch.locks")
        .description(
            "Epoch locks taken by claims, at once or after queueing for them, or skipped once"
                + " the epoch was found closed")
        .tag("namespace", namespace)
        .tag("how", how)
        .register(registry)
        .increment();
  }

  /**
   * A held claim, woken with the rest of its deploy's waiting claims by a close, took the "done" of
   * another claim's look instead of looking itself.
   */
  public void lookShared(String namespace) {
    Counter.builder("rollcall.claims.looks.shared")
        .description(
            "Held claims woken by a close that answered with another claim's look of the same"
                + " deploy instead of reading the database themselves")
        .tag("namespace", namespace)
        .register(registry)
        .increment();
  }

  /**
   * A claim of a deploy whose pass this replica had read closed was answered "done" from one read,
   * without a claim's transactions.
   */
  public void passOver(String namespace) {
    Counter.builder("rollcall.claims.pass.over")
        .description(
            "Claims of a deploy whose pass was known closed, answered done from one read instead"
                + " of a claim's transactions")
        .tag("namespace", namespace)
        .register(registry)
        .increment();
  }

  /** A sweep claim cut short by the sweep's rate bound. */
  public void scanFull(String namespace) {
    Counter.builder("rollcall.claims.scan.full")
        .description(
            "Claims (each look of a held claim) that could not cut a page because"
                + " rollcall.claim.max-scanners instances already work the pass")
        .tag("namespace", namespace)
        .register(registry)
        .increment();
  }

  public void sweepRateLimited(String namespace) {
    Counter.builder("rollcall.sweep.rate.limited")
        .description("Sweep claims cut short by rollcall.sweep.max-runs-per-second")
        .tag("namespace", namespace)
        .register(registry)
        .increment();
  }

  private Timer timer(String name, String description, String namespace) {
    return Timer.builder(name)
        .description(description)
        .tag("namespace", namespace)
        .publishPercentileHistogram()
        .register(registry);
  }
}
