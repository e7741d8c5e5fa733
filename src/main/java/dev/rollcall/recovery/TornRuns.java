package dev.rollcall.recovery;

import dev.rollcall.queue.QueueLocks;
import dev.rollcall.source.DeadDeliveries;
import dev.rollcall.source.Mend;
import dev.rollcall.source.RunSource;
import dev.rollcall.source.Savepoints;
import io.micrometer.core.instrument.MeterRegistry;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.SqlClient;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import org.jboss.logging.Logger;

/**
 * Mends the runs the engine's own non-atomic writes tore (a row written, its event not, because the
 * process died between two statements; see the source's {@link RunSource#mendTorn}), so that the
 * runtime can go on when the run is next delivered. It runs inside the transaction that hands the
 * runs out, before the batch or the released queue locks are visible to anyone: the first delivery
 * after it already replays the mended log.
 *
 * <p>Which runs: those of a takeover (the owner is dead or gone) but the finished, and of those
 * only the writes no live delivery can be making; and, in boot, sweep and manual passes, the runs
 * handed out, which the classification found owned by no live instance, untouched for the activity
 * fence and with no live wake path. Never a write a live process may be making: its half-done write
 * looks the same.
 *
 * <p>Each mend is a ledger row ({@code torn-repaired}), a count ({@code rollcall.torn.repaired} by
 * the write) and a log line. A failure to mend is logged and counted, rolled back to a savepoint,
 * and the runs are handed out as they would have been (fail open).
 */
@ApplicationScoped
public class TornRuns {

  private static final Logger LOG = Logger.getLogger(TornRuns.class);

  private final Ledger ledger;
  private final MeterRegistry meters;

  TornRuns(Ledger ledger, MeterRegistry meters) {
    this.ledger = ledger;
    this.meters = meters;
  }

  /**
   * The runs of a takeover's verdicts that may be mended: all but the finished, each in the epoch's
   * hands as {@code owner-dead}. A run a live instance reports is among them: whether a live
   * delivery may be writing it is the queue's to say, at the moment of the mend.
   */
  static Map<String, String> ofTakeover(List<Verdict> verdicts) {
    Map<String, String> runs = new LinkedHashMap<>();
    for (Verdict v : verdicts) {
      if (v.reason() != Reason.TERMINAL) {
        runs.put(v.runId(), Reason.OWNER_DEAD.wire());
      }
    }
    return runs;
  }

  /** Where mends go: the namespace's source, the epoch, and the takeover's subject (or null). */
  public record Scope(RunSource source, long epochId, UUID deadInstance) {}

  /**
   * A takeover's mends: the torn writes of the runs of {@link #ofTakeover} that no live delivery
   * can be making ({@link RunSource#mendTornUndelivered}). Every one of a run no process delivers
   * right now, whoever last reported it (a report is a heartbeat old; a delivery holds its queue
   * job locked); in a run a live process delivers (a peer runs a sibling step of a {@code
   * Promise.all}, or took the run up a moment ago), only the steps that no live delivery started:
   * the dead process's step stays torn while its siblings run on live replicas, but a step a live
   * process started too may be that process's write half-way through. What is left waits for the
   * takeover's re-check ({@link #recheck}).
   */
  public Uni<List<Mend>> takeover(
      SqlClient conn, Scope scope, List<Verdict> verdicts, List<QueueLocks.ReleasedLock> released) {
    DeadDeliveries deadDeliveries =
        new DeadDeliveries(
            released.stream()
                .map(QueueLocks.ReleasedLock::messageId)
                .filter(m -> m != null)
                .toList());
    return mend(conn, scope, ofTakeover(verdicts), deadDeliveries);
  }

  /**
   * A takeover's re-check, for the runs no live instance reports any more ({@code settled}): every
   * torn write of those the engine wrote nothing to within the activity fence. A live instance
   * reported them when the takeover opened, so only the dead instance's own steps were mended then;
   * a wait row, or a step whose writer is unknown, waited for this. A torn write that stayed
   * unexplained for the fence is no live process's write half-way through.
   */
  public Uni<List<Mend>> recheck(
      SqlClient conn, Scope scope, List<Verdict> settled, java.time.Duration fence) {
    Map<String, String> runs = new LinkedHashMap<>();
    for (Verdict v : settled) {
      if (v.reason() != Reason.TERMINAL) {
        runs.put(v.runId(), Reason.OWNER_DEAD.wire());
      }
    }
    RunSource source = scope.source();
    if (runs.isEmpty() || !source.tearsWrites()) {
      return Uni.createFrom().item(List.of());
    }
    return Savepoints.attempt(
            conn,
            "mend_torn",
            source
                .mendTornIfQuiet(conn, runs.keySet(), fence)
                .call(mends -> ledger.tornRepaired(conn, scope, runs, mends)),
            e -> failed(source, scope.epochId(), runs.size(), e))
        .map(found -> found.orElse(List.of()))
        .invoke(mends -> mends.forEach(m -> recorded(source.namespace(), scope.epochId(), m)));
  }

  /**
   * The verdicts with every run about to be handed out that still has a torn write (found by {@code
   * source} after the re-check's mends) deferred instead, as {@code recently-active}, its owner
   * message kept: the engine wrote to it within the activity fence, so the write may be a live
   * process's half-way through, and a delivery would replay a log that cannot go on.
   */
  static Uni<List<Verdict>> holdTorn(SqlClient conn, RunSource source, List<Verdict> verdicts) {
    List<String> handedOut =
        verdicts.stream()
            .filter(v -> v.disposition() == Verdict.Disposition.HAND_OUT)
            .map(Verdict::runId)
            .toList();
    if (handedOut.isEmpty() || !source.tearsWrites()) {
      return Uni.createFrom().item(verdicts);
    }
    return source
        .tornIn(conn, handedOut)
        .map(
            torn ->
                verdicts.stream()
                    .map(
                        v ->
                            v.disposition() == Verdict.Disposition.HAND_OUT
                                    && torn.contains(v.runId())
                                ? Verdict.defer(v.runId(), v.workflowName(), Reason.RECENTLY_ACTIVE)
                                    .withMessageId(v.messageId())
                                : v)
                    .toList());
  }

  /**
   * The verdicts once the runs whose interrupted step a dead step message owned inline are known
   * ({@code owners}: run id to that message), and which of those messages a queued job can still
   * deliver ({@code queued}, made unreplaceable by {@link RunSource#keepOwnerJobs}). The engine
   * re-runs such a step only when exactly that message is delivered. While its job can still run
   * (the one whose lock the takeover released, typically), that job is the re-drive: a run handed
   * out beside it would have the message delivered twice, two replays at once. So such a run is
   * deferred for its queued job ({@code has-queued-job}) with the message kept; one without a job
   * of its message left is re-driven as {@code owner-dead} with exactly that message id; one a live
   * instance reports is deferred with it, and settled so once no live instance reports it. Finished
   * runs are left alone, and so is a run the classification skipped for its queued job.
   */
  static List<Verdict> redriveOwners(
      List<Verdict> verdicts, Map<String, String> owners, Set<String> queued, UUID deadInstance) {
    List<Verdict> out = new ArrayList<>(verdicts.size());
    for (Verdict v : verdicts) {
      String owner = owners.get(v.runId());
      if (owner == null || v.reason() == Reason.TERMINAL) {
        out.add(v);
      } else if (v.reason() == Reason.OWNED_BY_LIVE_INSTANCE) {
        out.add(
            Verdict.defer(v.runId(), v.workflowName(), Reason.OWNED_BY_LIVE_INSTANCE)
                .withMessageId(owner));
      } else if (queued.contains(owner)) {
        out.add(
            v.disposition() == Verdict.Disposition.SKIP
                ? v
                : Verdict.defer(v.runId(), v.workflowName(), Reason.HAS_QUEUED_JOB)
                    .withMessageId(owner));
      } else {
        out.add(
            Verdict.handOut(v.runId(), v.workflowName(), Reason.OWNER_DEAD, deadInstance)
                .withMessageId(owner));
      }
    }
    return out;
  }

  /**
   * A takeover's verdicts after {@link #redriveOwners}: the runs' steps interrupted while a step
   * message of the dead instance ({@code released}, the jobs its workers held) owned them inline.
   */
  public Uni<List<Verdict>> redriveStepMessageOwners(
      SqlClient conn,
      RunSource source,
      List<Verdict> verdicts,
      List<QueueLocks.ReleasedLock> released,
      UUID deadInstance) {
    List<String> owners =
        released.stream()
            .filter(l -> l.stepId() != null && l.messageId() != null)
            .map(QueueLocks.ReleasedLock::messageId)
            .toList();
    if (owners.isEmpty() || verdicts.isEmpty()) {
      return Uni.createFrom().item(verdicts);
    }
    return source
        .interruptedStepOwners(conn, verdicts.stream().map(Verdict::runId).toList(), owners)
        .chain(found -> withQueuedOwners(conn, source, verdicts, found, deadInstance));
  }

  /**
   * A takeover's re-check of runs it deferred with an owner message ({@code deferred}: run id to
   * that message): {@link #redriveOwners} for those whose interrupted step that message still owns.
   */
  public Uni<List<Verdict>> redriveDeferredOwners(
      SqlClient conn,
      RunSource source,
      List<Verdict> verdicts,
      Map<String, String> deferred,
      UUID deadInstance) {
    if (deferred.isEmpty()) {
      return Uni.createFrom().item(verdicts);
    }
    return source
        .interruptedStepOwners(conn, deferred.keySet(), Set.copyOf(deferred.values()))
        .chain(
            found -> {
              Map<String, String> still = new LinkedHashMap<>();
              found.forEach(
                  (run, owner) -> {
                    if (owner.equals(deferred.get(run))) {
                      still.put(run, owner);
                    }
                  });
              return withQueuedOwners(conn, source, verdicts, still, deadInstance);
            });
  }

  /** {@link #redriveOwners}, once the owners' jobs that can still run are known and kept. */
  private static Uni<List<Verdict>> withQueuedOwners(
      SqlClient conn,
      RunSource source,
      List<Verdict> verdicts,
      Map<String, String> owners,
      UUID deadInstance) {
    if (owners.isEmpty()) {
      return Uni.createFrom().item(verdicts);
    }
    return source
        .keepOwnerJobs(conn, Set.copyOf(owners.values()))
        .map(queued -> redriveOwners(verdicts, owners, queued, deadInstance));
  }

  /** The runs of a pass's verdicts that may be mended: those handed out. */
  static Map<String, String> ofPass(List<Verdict> verdicts) {
    Map<String, String> runs = new LinkedHashMap<>();
    for (Verdict v : verdicts) {
      if (v.disposition() == Verdict.Disposition.HAND_OUT) {
        runs.put(v.runId(), v.reason().wire());
      }
    }
    return runs;
  }

  /** A pass's mends: every torn write of the runs it hands out. */
  public Uni<List<Mend>> pass(
      SqlClient conn, RunSource source, long epochId, List<Verdict> verdicts) {
    return mend(conn, new Scope(source, epochId, null), ofPass(verdicts), null);
  }

  /**
   * Mends the torn writes of {@code runs} (run id to the reason it is in the epoch's hands), only
   * those no live delivery can be making unless {@code deliveries} (the dead instance's) is null,
   * and records each.
   */
  private Uni<List<Mend>> mend(
      SqlClient conn, Scope scope, Map<String, String> runs, DeadDeliveries deliveries) {
    RunSource source = scope.source();
    long epochId = scope.epochId();
    // A source that writes atomically costs a pass nothing here, not even a savepoint.
    if (runs.isEmpty() || !source.tearsWrites()) {
      return Uni.createFrom().item(List.of());
    }
    return Savepoints.attempt(
            conn,
            "mend_torn",
            (deliveries == null
                    ? source.mendTorn(conn, runs.keySet())
                    : source.mendTornUndelivered(conn, runs.keySet(), deliveries))
                .call(mends -> ledger.tornRepaired(conn, scope, runs, mends)),
            e -> failed(source, epochId, runs.size(), e))
        .map(found -> found.orElse(List.of()))
        .invoke(mends -> mends.forEach(m -> recorded(source.namespace(), epochId, m)));
  }

  private void failed(RunSource source, long epochId, int runs, Throwable e) {
    LOG.warnf(
        "epoch %d of namespace %s: looking for torn writes in %d runs failed; they are"
            + " handed out as they are: %s",
        epochId, source.namespace(), runs, e.getMessage());
    meters.counter("rollcall.torn.failures", "namespace", source.namespace()).increment();
  }

  private void recorded(String namespace, long epochId, Mend mend) {
    meters
        .counter("rollcall.torn.repaired", "namespace", namespace, "write", mend.write())
        .increment();
    LOG.infof(
        "epoch %d of namespace %s: run %s had a torn %s, repaired: %s",
        epochId, namespace, mend.runId(), mend.write(), mend.detail());
  }
}
