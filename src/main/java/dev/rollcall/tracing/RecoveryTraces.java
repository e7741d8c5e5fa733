package dev.rollcall.tracing;

import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanBuilder;
import io.opentelemetry.api.trace.SpanContext;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.api.trace.propagation.W3CTraceContextPropagator;
import io.opentelemetry.context.Context;
import io.opentelemetry.context.propagation.TextMapGetter;
import io.smallrye.mutiny.Uni;
import jakarta.enterprise.context.ApplicationScoped;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.UUID;
import java.util.function.BiConsumer;
import java.util.function.Function;
import java.util.function.Supplier;

/**
 * Every span Rollcall writes, with its name and attributes, in one place (docs/operations.md,
 * "Traces", lists them). A pass's trace context travels with its row ({@code epochs.trace_parent},
 * a W3C {@code traceparent}), so its hand-outs and its close join its trace on whichever service
 * replica they happen; a death is one trace from its evidence to its takeover's close. With tracing
 * off (no OTLP endpoint configured) the tracer is a no-op: spans cost next to nothing and no pass
 * carries a trace context.
 */
@ApplicationScoped
public class RecoveryTraces {

  public static final String DEATH = "rollcall.death";
  public static final String EVIDENCE = "rollcall.death.evidence";
  public static final String DECLARED_DEAD = "rollcall.instance.declared-dead";
  public static final String LOCKS_RELEASED = "rollcall.queue.locks-released";
  public static final String REGISTER = "rollcall.register";
  public static final String HEARTBEAT_FLUSH = "rollcall.heartbeat.flush";
  public static final String CLAIM = "rollcall.claim";
  public static final String COMPLETE = "rollcall.complete";

  public static final AttributeKey<String> NAMESPACE = AttributeKey.stringKey("rollcall.namespace");
  public static final AttributeKey<String> DEPLOYMENT =
      AttributeKey.stringKey("rollcall.deployment_id");
  public static final AttributeKey<String> INSTANCE =
      AttributeKey.stringKey("rollcall.instance.id");
  public static final AttributeKey<String> PROOF = AttributeKey.stringKey("rollcall.death.proof");
  public static final AttributeKey<String> LEASE_EXPIRED_AT =
      AttributeKey.stringKey("rollcall.lease.expired_at");
  public static final AttributeKey<List<String>> WORKERS =
      AttributeKey.stringArrayKey("rollcall.queue.workers");

  /**
   * How many queue workers a dead instance had (named or learned): a graphile-worker 0.16 process
   * has one per concurrency slot and new ones after each restart of its pool, dozens over a day, so
   * the declaration counts them; the lock release names the few that held locks.
   */
  public static final AttributeKey<Long> WORKER_COUNT =
      AttributeKey.longKey("rollcall.queue.workers.count");

  public static final AttributeKey<Long> EPOCH = AttributeKey.longKey("rollcall.epoch.id");
  public static final AttributeKey<String> EPOCH_KIND =
      AttributeKey.stringKey("rollcall.epoch.kind");
  public static final AttributeKey<Long> BATCH = AttributeKey.longKey("rollcall.batch.id");
  public static final AttributeKey<Long> FENCE = AttributeKey.longKey("rollcall.batch.fence");
  public static final AttributeKey<Long> RUNS = AttributeKey.longKey("rollcall.runs.handed_out");
  public static final AttributeKey<List<String>> REASONS =
      AttributeKey.stringArrayKey("rollcall.runs.reasons");
  public static final AttributeKey<Long> BATCHES = AttributeKey.longKey("rollcall.batches");
  public static final AttributeKey<Long> SKIPPED = AttributeKey.longKey("rollcall.runs.skipped");
  public static final AttributeKey<Long> DEFERRED = AttributeKey.longKey("rollcall.runs.deferred");
  public static final AttributeKey<Long> RECHECKED =
      AttributeKey.longKey("rollcall.runs.rechecked");
  public static final AttributeKey<Long> LOCKS = AttributeKey.longKey("rollcall.locks.released");
  public static final AttributeKey<String> OUTCOME = AttributeKey.stringKey("rollcall.outcome");
  public static final AttributeKey<Long> ENQUEUED = AttributeKey.longKey("rollcall.runs.enqueued");
  public static final AttributeKey<Long> FAILED = AttributeKey.longKey("rollcall.runs.failed");
  public static final AttributeKey<Long> RETRIED = AttributeKey.longKey("rollcall.runs.retried");
  public static final AttributeKey<String> CLOSE_REASON =
      AttributeKey.stringKey("rollcall.epoch.close_reason");
  public static final AttributeKey<Long> BEATS = AttributeKey.longKey("rollcall.heartbeats");

  /** The span that opens a pass of {@code kind} ({@code rollcall.takeover.open}, ...). */
  public static String opened(String kind) {
    return "rollcall." + kind + ".open";
  }

  /** The span of a batch of a pass of {@code kind} handed out to a claimer. */
  public static String handedOut(String kind) {
    return "rollcall." + kind + ".hand-out";
  }

  /** The span of a re-check of the deferred runs of a pass of {@code kind}. */
  public static String rechecked(String kind) {
    return "rollcall." + kind + ".recheck";
  }

  /** The span that closes a pass of {@code kind}. */
  public static String closed(String kind) {
    return "rollcall." + kind + ".close";
  }

  private static final TextMapGetter<Map<String, String>> FROM_MAP =
      new TextMapGetter<>() {
        @Override
        public Iterable<String> keys(Map<String, String> carrier) {
          return carrier.keySet();
        }

        @Override
        public String get(Map<String, String> carrier, String key) {
          return carrier == null ? null : carrier.get(key);
        }
      };

  private final Tracer tracer;

  RecoveryTraces(Tracer tracer) {
    this.tracer = tracer;
  }

  /** The W3C {@code traceparent} of a span, empty when it is not recorded (tracing off). */
  public static Optional<String> traceParent(Span span) {
    if (!span.getSpanContext().isValid()) {
      return Optional.empty();
    }
    Map<String, String> carrier = new HashMap<>();
    W3CTraceContextPropagator.getInstance().inject(Context.root().with(span), carrier, Map::put);
    return Optional.ofNullable(carrier.get("traceparent"));
  }

  /** The context a stored {@code traceparent} names; the root context when there is none. */
  static Context context(String traceParent) {
    return traceParent == null
        ? Context.root()
        : W3CTraceContextPropagator.getInstance()
            .extract(Context.root(), Map.of("traceparent", traceParent), FROM_MAP);
  }

  /**
   * {@code work} inside a span named {@code name}, a child of the current span (the request's, at
   * the HTTP layer): started when it is subscribed, given to {@code work} (to link to it),
   * described by {@code describe} with its result, ended with its result or its failure.
   */
  public <T> Uni<T> traced(
      String name, Function<Span, Uni<T>> work, BiConsumer<Span, ? super T> describe) {
    return within(() -> tracer.spanBuilder(name), work, describe);
  }

  private static <T> Uni<T> within(
      Supplier<SpanBuilder> span,
      Function<Span, Uni<T>> work,
      BiConsumer<Span, ? super T> describe) {
    return Uni.createFrom()
        .deferred(
            () -> {
              Span started = span.get().startSpan();
              return work.apply(started)
                  .invoke(result -> describe.accept(started, result))
                  .onFailure()
                  .invoke(e -> failed(started, e))
                  .onTermination()
                  .invoke(started::end);
            });
  }

  /** A claim's span: its outcome ({@code batch}, {@code wait}, {@code done}) and its pass. */
  public static void claimed(Span claim, String outcome, Long epochId) {
    claim.setAttribute(OUTCOME, outcome);
    if (epochId != null) {
      claim.setAttribute(EPOCH, epochId);
    }
  }

  /** A batch handed out: its pass, the batch, its fence and the reason of each of its runs. */
  public record HandOut(
      long epochId, String kind, long batchId, int fence, List<String> reasonOfEachRun) {

    private void describe(Span span) {
      span.setAttribute(EPOCH, epochId);
      span.setAttribute(EPOCH_KIND, kind);
      span.setAttribute(BATCH, batchId);
      span.setAttribute(FENCE, (long) fence);
      span.setAttribute(RUNS, (long) reasonOfEachRun.size());
      span.setAttribute(REASONS, reasons(reasonOfEachRun));
    }
  }

  /** A claim's span when it took a batch: the batch, its fence, its runs and their reasons. */
  public static void claimedBatch(Span claim, HandOut batch) {
    claim.setAttribute(OUTCOME, "batch");
    batch.describe(claim);
  }

  /** What a complete did with its batch's runs. */
  public record Completed(int enqueued, int failed, int retried) {}

  /** A complete's span: the batch, its fence, and what became of its runs. */
  public static void completed(Span complete, long batchId, int fence, Completed runs) {
    complete.setAttribute(BATCH, batchId);
    complete.setAttribute(FENCE, (long) fence);
    complete.setAttribute(ENQUEUED, (long) runs.enqueued());
    complete.setAttribute(FAILED, (long) runs.failed());
    complete.setAttribute(RETRIED, (long) runs.retried());
  }

  /** A registration's span: the new instance, its namespace and deploy. */
  public static void registered(Span register, String namespace, String deployment, UUID id) {
    register.setAttribute(NAMESPACE, namespace);
    register.setAttribute(DEPLOYMENT, deployment);
    register.setAttribute(INSTANCE, id.toString());
  }

  /** A heartbeat flush's span: how many heartbeats it renewed together. */
  public static void flushed(Span flush, int beats) {
    flush.setAttribute(BEATS, (long) beats);
  }

  private static void failed(Span span, Throwable e) {
    span.recordException(e);
    span.setStatus(StatusCode.ERROR, e.getClass().getSimpleName());
  }

  /** Counts of runs by reason, as a span attribute: {@code ["owner-dead=3", "pending=1"]}. */
  public static List<String> reasons(List<String> reasonOfEachRun) {
    Map<String, Integer> counts = new TreeMap<>();
    reasonOfEachRun.forEach(r -> counts.merge(r, 1, Integer::sum));
    return counts.entrySet().stream().map(e -> e.getKey() + "=" + e.getValue()).toList();
  }

  // ---------------------------------------------------------------------------------------------
  // A death: one trace from the evidence to the takeover's close.

  /** A death about to be decided on {@code proof}: its trace begins now, if the death is won. */
  public Death death(String proof) {
    return new Death(proof, Instant.now());
  }

  /**
   * One death's trace. Nothing is written until the guarded statement declared the death: a death
   * another replica (or a heartbeat) won leaves no trace here.
   */
  public final class Death {
    private final String proof;
    private final Instant seen;
    private Span root;
    private Span declared;

    private Death(String proof, Instant seen) {
      this.proof = proof;
      this.seen = seen;
    }

    /**
     * The guarded statement declared the instance dead: the trace's root ({@link #DEATH}) and its
     * evidence ({@link #EVIDENCE}, from the moment the evidence was taken up until the statement
     * confirmed it) are written, and the declaration ({@link #DECLARED_DEAD}) lasts until its
     * transaction, with the takeover, commits. Returns the context the takeover opens in.
     */
    public Context declared(
        UUID instanceId, String namespace, OffsetDateTime leaseExpiredAt, List<String> workerIds) {
      Instant now = Instant.now();
      root =
          tracer
              .spanBuilder(DEATH)
              .setNoParent()
              .setStartTimestamp(seen)
              .setAttribute(INSTANCE, instanceId.toString())
              .setAttribute(NAMESPACE, namespace)
              .setAttribute(PROOF, proof)
              .startSpan();
      Context death = Context.root().with(root);
      SpanBuilder evidence =
          tracer
              .spanBuilder(EVIDENCE)
              .setParent(death)
              .setStartTimestamp(seen)
              .setAttribute(PROOF, proof)
              .setAttribute(INSTANCE, instanceId.toString());
      if (leaseExpiredAt != null) {
        evidence.setAttribute(LEASE_EXPIRED_AT, leaseExpiredAt.toString());
      }
      evidence.startSpan().end(now);
      declared =
          tracer
              .spanBuilder(DECLARED_DEAD)
              .setParent(death)
              .setStartTimestamp(now)
              .setAttribute(INSTANCE, instanceId.toString())
              .setAttribute(NAMESPACE, namespace)
              .setAttribute(WORKER_COUNT, (long) workerIds.size())
              .startSpan();
      return death;
    }

    /** The death's transaction ended: committed, or failed with {@code failure} (then null). */
    public void ended(Throwable failure) {
      if (root == null) {
        return;
      }
      if (failure != null) {
        failed(declared, failure);
        failed(root, failure);
      }
      declared.end();
      root.end();
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Passes: opened, handed out, closed.

  /**
   * The span of a pass opened now, a child of {@code parent} (a takeover's: its death), or a trace
   * of its own linked to the current span (the claim that opened a boot pass), when {@code parent}
   * is null. The caller ends it once the pass is filled, and stores its {@link #traceParent}.
   */
  public Span passOpened(String kind, long epochId, String namespace, Context parent) {
    SpanBuilder builder =
        tracer
            .spanBuilder(opened(kind))
            .setAttribute(EPOCH, epochId)
            .setAttribute(EPOCH_KIND, kind)
            .setAttribute(NAMESPACE, namespace);
    if (parent != null) {
      builder.setParent(parent);
    } else {
      SpanContext current = Span.current().getSpanContext();
      builder.setNoParent();
      if (current.isValid()) {
        builder.addLink(current);
      }
    }
    return builder.startSpan();
  }

  /**
   * A pass's span once it is filled: how many runs, in how many batches, how many skipped, and how
   * many deferred to a re-check (a takeover's runs a live instance reports, which the pass stays
   * open for: its close waits for them).
   */
  public static void filled(Span pass, int runs, int batches, int skipped, int deferred) {
    pass.setAttribute(RUNS, runs);
    pass.setAttribute(BATCHES, batches);
    pass.setAttribute(SKIPPED, skipped);
    pass.setAttribute(DEFERRED, deferred);
  }

  /** A lock the takeover released: its worker, and how that worker was known to be the dead's. */
  public record ReleasedLock(String workerId, String knownBy) {}

  /**
   * The queue locks a takeover released ({@link #LOCKS_RELEASED}), a child of its pass's span: how
   * many, and each worker with how it was known ({@code named} by the instance, {@code learned}
   * from a message it reported).
   */
  public <T> Uni<T> locksReleased(
      Span pass, String namespace, Uni<T> release, Function<T, List<ReleasedLock>> locks) {
    return within(
        () ->
            tracer
                .spanBuilder(LOCKS_RELEASED)
                .setParent(Context.root().with(pass))
                .setAttribute(NAMESPACE, namespace),
        span -> release,
        (span, result) -> {
          List<ReleasedLock> released = locks.apply(result);
          span.setAttribute(LOCKS, released.size());
          span.setAttribute(
              WORKERS,
              released.stream().map(l -> l.workerId() + " " + l.knownBy()).distinct().toList());
        });
  }

  /**
   * A batch of the pass whose row carries {@code traceParent} handed out under {@code fence}: a
   * span in the pass's trace, linked to the claim that took it ({@code claim}, in the claimer's
   * request trace).
   */
  public void handedOut(String traceParent, HandOut batch, Span claim) {
    Span span =
        tracer.spanBuilder(handedOut(batch.kind())).setParent(context(traceParent)).startSpan();
    batch.describe(span);
    if (claim.getSpanContext().isValid()) {
      span.addLink(claim.getSpanContext());
    }
    span.end();
  }

  /**
   * What one re-check of a pass's deferred runs decided: of {@code rechecked} runs due, how many it
   * handed out, skipped for good, and deferred again (a takeover's, while a live instance still
   * reports the run or its queued job may still run).
   */
  public record Recheck(
      long epochId,
      String kind,
      String namespace,
      long rechecked,
      long handedOut,
      long skipped,
      long deferredAgain) {}

  /**
   * A re-check of a pass's deferred runs, now, in the trace its row carries ({@code traceParent};
   * null: a trace alone): the span that says why a pass whose open span deferred runs closed later.
   */
  public void rechecked(String traceParent, Recheck r) {
    tracer
        .spanBuilder(rechecked(r.kind()))
        .setParent(context(traceParent))
        .setAttribute(EPOCH, r.epochId())
        .setAttribute(EPOCH_KIND, r.kind())
        .setAttribute(NAMESPACE, r.namespace())
        .setAttribute(RECHECKED, r.rechecked())
        .setAttribute(RUNS, r.handedOut())
        .setAttribute(SKIPPED, r.skipped())
        .setAttribute(DEFERRED, r.deferredAgain())
        .startSpan()
        .end();
  }

  /** A pass closed now, in the trace its row carries ({@code traceParent}; null: a trace alone). */
  public void closed(
      String traceParent, String kind, long epochId, String namespace, String reason) {
    tracer
        .spanBuilder(closed(kind))
        .setParent(context(traceParent))
        .setAttribute(EPOCH, epochId)
        .setAttribute(EPOCH_KIND, kind)
        .setAttribute(NAMESPACE, namespace)
        .setAttribute(CLOSE_REASON, reason)
        .startSpan()
        .end();
  }
}
