package dev.rollcall.recovery;

import dev.rollcall.config.RollcallConfig;
import dev.rollcall.metrics.RecoveryMetrics;
import dev.rollcall.queue.QueueLocks;
import dev.rollcall.recovery.Verdict.Disposition;
import dev.rollcall.registry.Ownership;
import dev.rollcall.source.RunSource;
import dev.rollcall.source.RunSources;
import dev.rollcall.tracing.RecoveryTraces;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.context.Context;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.SqlClient;
import io.vertx.mutiny.sqlclient.Tuple;
import jakarta.enterprise.context.ApplicationScoped;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import org.jboss.logging.Logger;

/**
 * Opens the takeover of an instance that died or left, inside the transaction that declared it so:
 * its in-flight runs become ready batches with reason {@code owner-dead}, the batches it held are
 * released, the queue locks its workers held are released so the queue redelivers its own messages
 * now (the only way past the engine's inline-ownership lease), and the writes the engine tore when
 * it died are mended ({@link TornRuns}).
 */
@ApplicationScoped
public class Takeovers {

  private static final Logger LOG = Logger.getLogger(Takeovers.class);

  private final RunSources sources;
  private final Epochs epochs;
  private final Batches batches;
  private final Ownership ownership;
  private final Classifier classifier;
  private final TornRuns tornRuns;
  private final Deferrals deferrals;
  private final Ledger ledger;
  private final RollcallConfig config;
  private final MeterRegistry meters;
  private final RecoveryTraces traces;
  private final SingleHandOut singleHandOut;

  Takeovers(
      RunSources sources,
      Epochs epochs,
      Batches batches,
      Ownership ownership,
      Classifier classifier,
      TornRuns tornRuns,
      Deferrals deferrals,
      Ledger ledger,
      RollcallConfig config,
      MeterRegistry meters,
      RecoveryTraces traces,
      SingleHandOut singleHandOut) {
    this.singleHandOut = singleHandOut;
    this.traces = traces;
    this.sources = sources;
    this.epochs = epochs;
    this.batches = batches;
    this.ownership = ownership;
    this.classifier = classifier;
    this.tornRuns = tornRuns;
    this.deferrals = deferrals;
    this.ledger = ledger;
    this.config = config;
    this.meters = meters;
  }

  /**
   * An instance that is gone.
   *
   * @param leaseExpiredAt when its lease ran out, for a crash; null for a graceful leave
   */
  public record Subject(
      UUID instanceId, String namespace, List<String> workerIds, OffsetDateTime leaseExpiredAt) {}

  /**
   * What a takeover did.
   *
   * @param deferred runs left for a re-check once no live instance reports them
   */
  public record Opened(
      long epochId, int runs, int batches, int skipped, int deferred, int locksReleased) {}

  /**
   * Opens the subject's takeover epoch, unless another service replica already did (then empty).
   */
  public Uni<Optional<Opened>> open(SqlClient conn, Subject subject) {
    return open(conn, subject, null);
  }

  /**
   * Opens the subject's takeover as {@link #open(SqlClient, Subject)} does, its span a child of
   * {@code death} (the trace of the death that opened it; null: a trace of its own, for a departure
   * or an eviction). The epoch's row carries the span's context: its hand-outs and its close join
   * that trace.
   */
  public Uni<Optional<Opened>> open(SqlClient conn, Subject subject, Context death) {
    return epochs
        .openTakeover(conn, subject.namespace(), subject.instanceId(), subject.leaseExpiredAt())
        .chain(
            epoch -> {
              if (epoch.isEmpty()) {
                return Uni.createFrom().item(Optional.<Opened>empty());
              }
              Span pass =
                  traces.passOpened(
                      EpochKind.TAKEOVER.wire(), epoch.get().id(), subject.namespace(), death);
              return epochs
                  .carryTrace(conn, epoch.get().id(), pass)
                  .chain(() -> fill(conn, subject, epoch.get(), pass))
                  .invoke(
                      o ->
                          RecoveryTraces.filled(
                              pass, o.runs(), o.batches(), o.skipped(), o.deferred()))
                  .onTermination()
                  .invoke(pass::end)
                  .map(Optional::of);
            });
  }

  /**
   * The dead instance's held batches are released and its workers' queue locks freed first, so that
   * classifying its runs sees its own redelivered messages as the live wake path they are.
   */
  private Uni<Opened> fill(SqlClient conn, Subject subject, Epoch epoch, Span pass) {
    Optional<RunSource> source =
        sources.has(subject.namespace())
            ? Optional.of(sources.get(subject.namespace()))
            : Optional.empty();
    return batches
        .releaseHeldBy(conn, subject.instanceId())
        .chain(
            () ->
                traces.locksReleased(
                    pass,
                    subject.namespace(),
                    releaseLocks(conn, source, epoch, subject),
                    locks ->
                        locks.stream()
                            .map(l -> new RecoveryTraces.ReleasedLock(l.workerId(), l.knownBy()))
                            .toList()))
        .chain(
            locks ->
                ownership
                    .release(conn, subject.instanceId())
                    .map(reported -> covered(reported, locks))
                    .chain(
                        runIds ->
                            source.isEmpty() || runIds.isEmpty()
                                ? Uni.createFrom().item(List.<Verdict>of())
                                : classifier.takeover(
                                    conn, source.get(), runIds, subject.instanceId()))
                    // Before anything is visible: the owner's redelivered messages and the
                    // batches replay the mended log once this transaction commits.
                    .chain(
                        verdicts ->
                            source.isEmpty()
                                ? Uni.createFrom().item(verdicts)
                                : tornRuns
                                    .takeover(
                                        conn,
                                        new TornRuns.Scope(
                                            source.get(), epoch.id(), subject.instanceId()),
                                        verdicts,
                                        locks)
                                    .replaceWith(verdicts))
                    .chain(
                        verdicts ->
                            source.isEmpty()
                                ? Uni.createFrom().item(verdicts)
                                : tornRuns.redriveStepMessageOwners(
                                    conn, source.get(), verdicts, locks, subject.instanceId()))
                    // Another instance that reported the same runs may have died with this one.
                    .chain(verdicts -> singleHandOut.firstLook(conn, epoch, verdicts))
                    .chain(verdicts -> handOut(conn, source, epoch, verdicts, locks.size())))
        .chain(
            opened ->
                (opened.batches() == 0
                        // A takeover has no queue evidence to forget (WakeJobs.forget).
                        ? epochs.closeIfFinished(conn, epoch.id())
                        : Uni.createFrom().item(false))
                    .chain(() -> recordDetection(conn, subject))
                    .invoke(
                        () ->
                            LOG.infof(
                                "epoch %d opened: takeover of %s instance %s in namespace %s"
                                    + " (%d runs in %d batches, %d skipped, %d deferred, %d"
                                    + " queue locks released)",
                                epoch.id(),
                                subject.leaseExpiredAt() == null ? "departed" : "dead",
                                subject.instanceId(),
                                subject.namespace(),
                                opened.runs(),
                                opened.batches(),
                                opened.skipped(),
                                opened.deferred(),
                                opened.locksReleased()))
                    .replaceWith(opened));
  }

  /**
   * The runs a takeover covers: the subject's last reported in-flight set, and the runs of the jobs
   * its workers held, even those it picked up after its last report.
   */
  static List<String> covered(List<String> reported, List<QueueLocks.ReleasedLock> locks) {
    java.util.TreeSet<String> runs = new java.util.TreeSet<>(reported);
    locks.stream().map(QueueLocks.ReleasedLock::runId).filter(r -> r != null).forEach(runs::add);
    return List.copyOf(runs);
  }

  private Uni<Opened> handOut(
      SqlClient conn,
      Optional<RunSource> source,
      Epoch epoch,
      List<Verdict> verdicts,
      int locksReleased) {
    List<Verdict> skipped =
        verdicts.stream().filter(v -> v.disposition() == Disposition.SKIP).toList();
    // Runs a live instance reports that the dead one owed a re-drive (TornRuns): the epoch stays
    // open for their re-check (DeferredRechecks), a heartbeat interval from now.
    List<Verdict> deferred =
        verdicts.stream().filter(v -> v.disposition() == Disposition.DEFER).toList();
    List<HandedOutRun> runs =
        verdicts.stream()
            .filter(v -> v.disposition() == Disposition.HAND_OUT)
            .map(
                v ->
                    new HandedOutRun(
                        v.runId(),
                        v.workflowName(),
                        source.orElseThrow().queueName(v.workflowName()),
                        v.reason(),
                        v.deadInstanceId(),
                        v.messageId()))
            .toList();
    return ledger
        .record(conn, epoch, skipped, "skipped", null)
        .chain(() -> deferrals.defer(conn, epoch, deferred))
        .chain(() -> batches.ready(conn, epoch, runs, config.batch().defaultSize()))
        .map(
            n ->
                new Opened(
                    epoch.id(), runs.size(), n, skipped.size(), deferred.size(), locksReleased));
  }

  /**
   * Releases the locks of every known worker of the subject (registered, learned, and those holding
   * the jobs of the messages it last reported); returns what was released.
   */
  private Uni<List<QueueLocks.ReleasedLock>> releaseLocks(
      SqlClient conn, Optional<RunSource> source, Epoch epoch, Subject subject) {
    Optional<QueueLocks> queue = source.flatMap(RunSource::queue);
    if (queue.isEmpty()) {
      return Uni.createFrom().item(List.of());
    }
    return queue
        .get()
        .releaseLocksOf(conn, subject.instanceId(), subject.workerIds())
        .call(
            released ->
                ledger.locksReleased(
                    conn,
                    Ledger.LockRelease.ofDeadOwner(
                        subject.namespace(), epoch.id(), subject.instanceId()),
                    released))
        .invoke(
            released ->
                meters
                    .counter(
                        RecoveryMetrics.LOCKS_RELEASED,
                        "namespace",
                        subject.namespace(),
                        "reason",
                        Reason.OWNER_DEAD.wire())
                    .increment(released.size()));
  }

  /**
   * Detection latency of a crash: the takeover opened now minus the moment the dead instance's
   * lease ran out (its last heartbeat plus the lease TTL), both by the database's clock.
   */
  private Uni<Void> recordDetection(SqlClient conn, Subject subject) {
    if (subject.leaseExpiredAt() == null) {
      return Uni.createFrom().voidItem();
    }
    return conn.preparedQuery(
            "SELECT greatest(0, extract(epoch FROM (now() - $1)) * 1000)::bigint AS ms")
        .execute(Tuple.of(subject.leaseExpiredAt()))
        .invoke(
            rows ->
                Timer.builder("rollcall.dead.owner.detection")
                    .description("From a dead instance's lease expiry to its takeover epoch")
                    .tag("namespace", subject.namespace())
                    .publishPercentileHistogram()
                    .register(meters)
                    .record(Duration.ofMillis(rows.iterator().next().getLong("ms"))))
        .replaceWithVoid();
  }
}
