package dev.rollcall.recovery;

import dev.rollcall.config.RollcallConfig;
import dev.rollcall.recovery.DecisionTable.Decision;
import dev.rollcall.registry.Ownership;
import dev.rollcall.source.Evidence;
import dev.rollcall.source.RunSource;
import dev.rollcall.source.Savepoints;
import dev.rollcall.source.ScannedRun;
import io.micrometer.core.instrument.MeterRegistry;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.SqlClient;
import io.vertx.mutiny.sqlclient.Tuple;
import jakarta.enterprise.context.ApplicationScoped;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.UUID;
import java.util.function.BiFunction;
import org.jboss.logging.Logger;

/**
 * Decides what an epoch does with each run, a page at a time, with a few set-based queries. It
 * skips or defers a run only with positive proof — a live owner, recent engine activity, a queued
 * job that will wake it, a terminal status — and hands out everything else with the reason the
 * engine's state gives. When reading that state fails, the whole page is handed out as {@code
 * unclassified} (fail open), and the failure is logged and counted.
 */
@ApplicationScoped
public class Classifier {

  private static final Logger LOG = Logger.getLogger(Classifier.class);

  private final Ownership ownership;
  private final RollcallConfig config;
  private final MeterRegistry meters;

  Classifier(Ownership ownership, RollcallConfig config, MeterRegistry meters) {
    this.ownership = ownership;
    this.config = config;
    this.meters = meters;
  }

  /** What is known about a page before its verdicts are written. */
  private record Facts(
      Map<String, UUID> owners,
      Optional<Map<String, Evidence>> evidence,
      Set<String> unchangedSinceRedrive) {

    Evidence of(String runId) {
      return evidence.map(e -> e.getOrDefault(runId, Evidence.NONE)).orElse(Evidence.NONE);
    }

    /** The decision table's view of one active run. */
    DecisionTable.Signals signals(RunSource source, ScannedRun run, Evidence ev) {
      return new DecisionTable.Signals(
          owners.containsKey(run.runId()),
          run.recentlyActive() || ev.recentEvent(),
          ev.strandedOwner() != null,
          ev.liveQueuedJob(),
          ev.parkedOnHook(),
          unchangedSinceRedrive.contains(run.runId()),
          source.isPending(run),
          source.classifies() && evidence.isPresent(),
          ev.openStep(),
          ev.dueWait());
    }
  }

  /**
   * First look at a scanned page: a run a live instance is executing, or that the engine touched
   * within the activity fence, waits for the re-check; a run a queued job will wake is skipped; the
   * others are handed out.
   */
  public Uni<List<Verdict>> firstLook(
      SqlClient client, RunSource source, Epoch epoch, List<ScannedRun> page) {
    List<String> ids = page.stream().map(ScannedRun::runId).toList();
    long started = System.nanoTime();
    return facts(client, source, epoch, ids)
        .invoke(
            ignored ->
                meters
                    .timer("rollcall.classification", "namespace", source.namespace())
                    .record(Duration.ofNanos(System.nanoTime() - started)))
        .map(
            facts -> {
              List<Verdict> verdicts = new ArrayList<>(page.size());
              for (ScannedRun run : page) {
                Evidence ev = facts.of(run.runId());
                verdicts.add(
                    DecisionTable.firstLook(facts.signals(source, run, ev))
                        .verdict(run.runId(), run.workflowName(), null, ev.strandedOwner()));
              }
              return verdicts;
            });
  }

  /**
   * The re-check of deferred runs before the epoch closes: still owned, still active, or finished
   * runs are skipped for good; the others are settled as on a first look.
   */
  public Uni<List<Verdict>> recheck(
      SqlClient client, RunSource source, Epoch epoch, List<String> runIds) {
    return lastLook(client, source, epoch, runIds, new Rule(null, DecisionTable::recheck));
  }

  /**
   * The in-flight runs of a dead instance, after its queue locks were released: handed out as
   * {@code owner-dead} unless they finished, another live instance has taken them up, or a queued
   * job (its own redelivered message, say) will wake them — two replays of one run at once would
   * corrupt its event log. Recent activity is no proof here: it is the dead owner's own.
   */
  public Uni<List<Verdict>> takeover(
      SqlClient client, RunSource source, List<String> runIds, UUID deadInstanceId) {
    return lastLook(
        client, source, null, runIds, new Rule(deadInstanceId, DecisionTable::takeover));
  }

  /**
   * A takeover's re-check of the runs it deferred, for a live owner or a queued job ({@link
   * DecisionTable#takeoverRecheck}): read straight from the queue, as the takeover was.
   */
  public Uni<List<Verdict>> takeoverRecheck(
      SqlClient client,
      RunSource source,
      List<String> runIds,
      UUID deadInstanceId,
      boolean jobMayStillRun) {
    return lastLook(
        client,
        source,
        null,
        runIds,
        new Rule(
            deadInstanceId,
            (terminal, s) -> DecisionTable.takeoverRecheck(terminal, s, jobMayStillRun)));
  }

  /**
   * Which rows of the decision table a last look applies, and for whom.
   *
   * @param dead a takeover's instance; null for a pass's re-check
   */
  private record Rule(UUID dead, BiFunction<Boolean, DecisionTable.Signals, Decision> table) {}

  /**
   * A final verdict on runs known by id: a pass's re-check, a takeover or a takeover's re-check.
   */
  private Uni<List<Verdict>> lastLook(
      SqlClient client, RunSource source, Epoch epoch, List<String> runIds, Rule rule) {
    return source
        .lookup(client, runIds, config.effectiveActivityFence())
        .chain(
            current ->
                facts(client, source, epoch, runIds)
                    .map(
                        facts -> {
                          List<Verdict> verdicts = new ArrayList<>(runIds.size());
                          for (String id : runIds) {
                            ScannedRun run = current.get(id);
                            String name = run == null ? null : run.workflowName();
                            Evidence ev = facts.of(id);
                            boolean terminal = run == null || !source.isActive(run);
                            DecisionTable.Signals signals =
                                terminal ? null : facts.signals(source, run, ev);
                            Decision decision = rule.table().apply(terminal, signals);
                            verdicts.add(
                                decision.verdict(id, name, rule.dead(), ev.strandedOwner()));
                          }
                          return verdicts;
                        }));
  }

  private Uni<Facts> facts(SqlClient client, RunSource source, Epoch epoch, List<String> ids) {
    Uni<Optional<Map<String, Evidence>>> evidence =
        !source.classifies()
            ? Uni.createFrom().item(Optional.of(Map.of()))
            : Savepoints.attempt(
                client,
                "classify",
                source.evidence(
                    client,
                    epoch == null ? null : epoch.id(),
                    ids,
                    config.effectiveActivityFence()),
                e -> {
                  LOG.warnf(
                      "classifying %d runs of namespace %s failed; they are re-driven as"
                          + " unclassified: %s",
                      ids.size(), source.namespace(), e.getMessage());
                  meters
                      .counter("rollcall.classification.failures", "namespace", source.namespace())
                      .increment();
                });
    Uni<Set<String>> unchanged =
        epoch != null && epoch.kind() == EpochKind.SWEEP
            ? unchangedSinceRedrive(client, source, epoch, ids)
            : Uni.createFrom().item(Set.of());
    // The owners' read is sent first and the savepoint with the evidence reads right behind it,
    // pipelined on the connection: the owners' answer is in before the savepoint opens, so a
    // failure inside it cannot touch that read. The sweep's check runs after the savepoint.
    return Uni.combine()
        .all()
        .unis(ownership.liveOwners(client, source.namespace(), ids), evidence)
        .collectFailures()
        .asTuple()
        .chain(t -> unchanged.map(same -> new Facts(t.getItem1(), t.getItem2(), same)));
  }

  /**
   * When each of runs $2 was last re-driven by an epoch other than $3 of namespace $1, for sweeps.
   * A hand-out in flight in another epoch (its batch leased now: its row is written at its outcome,
   * V18; rollcall.hand_outs_in_flight: the few leased batches, each probed by its key for these
   * runs), else the last enqueued hand-out, found by walking each run's ledger index backwards: a
   * few rows per run, however long its history (see Ledger.record). A batch leased before V18 has
   * 'leased' rows instead.
   */
  static final String UNCHANGED_SINCE_REDRIVE =
      "SELECT u.run_id, coalesce(f.at, h.at) AS at FROM unnest($2::text[]) AS u(run_id)"
          + " LEFT JOIN (SELECT i.run_id, max(i.recorded_at) AS at"
          + "   FROM rollcall.hand_outs_in_flight i"
          + "   WHERE i.namespace = $1 AND i.run_id = ANY($2::text[]) AND i.epoch_id <> $3"
          + "   GROUP BY i.run_id) f ON f.run_id = u.run_id"
          + " LEFT JOIN LATERAL (SELECT coalesce(l.resolved_at, l.recorded_at) AS at"
          + "   FROM rollcall.ledger l WHERE l.namespace = $1 AND l.run_id = u.run_id"
          + "   AND l.outcome IN ('enqueued', 'leased') AND l.epoch_id <> $3"
          + "   ORDER BY l.id DESC LIMIT 1) h ON f.at IS NULL"
          + " WHERE f.at IS NOT NULL OR h.at IS NOT NULL";

  /**
   * Sweeps: runs that another epoch re-drove (or is re-driving right now), about which the engine
   * has written nothing since. Re-driving them again would only add another job.
   */
  private Uni<Set<String>> unchangedSinceRedrive(
      SqlClient client, RunSource source, Epoch epoch, List<String> ids) {
    return client
        .preparedQuery(UNCHANGED_SINCE_REDRIVE)
        .execute(Tuple.of(epoch.namespace(), ids.toArray(String[]::new), epoch.id()))
        .chain(
            rows -> {
              Map<String, OffsetDateTime> redriven = new HashMap<>();
              rows.forEach(r -> redriven.put(r.getString("run_id"), r.getOffsetDateTime("at")));
              return source.unchangedSince(client, redriven);
            });
  }
}
