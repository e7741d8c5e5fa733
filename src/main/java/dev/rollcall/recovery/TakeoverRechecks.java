package dev.rollcall.recovery;

import dev.rollcall.config.RollcallConfig;
import dev.rollcall.database.Database;
import dev.rollcall.database.Databases;
import dev.rollcall.recovery.Verdict.Disposition;
import dev.rollcall.source.RunSource;
import dev.rollcall.source.RunSources;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.SqlClient;
import io.vertx.mutiny.sqlclient.Tuple;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.List;
import java.util.UUID;
import java.util.stream.StreamSupport;

/**
 * The runs a takeover deferred (a live instance still reported them, or a queued job was to wake
 * them: {@link DecisionTable#takeover}) settled when their re-check is due. A claim on the takeover
 * does it ({@link DeferredRechecks}); so does this service itself, on the reaper's schedule when
 * the reaper's look finds one due ({@link ReaperTick}: {@link #DUE} there too), so that a deferred
 * run is re-driven when its re-check is due rather than when an instance next happens to claim: its
 * batch is cut ready, and the notice of a claimable batch wakes the instances' waiting claims at
 * once.
 */
@ApplicationScoped
class TakeoverRechecks {

  /** The most deferred runs one re-check settles in one transaction. */
  static final int MAX_RUNS = 500;

  /**
   * Open takeovers with a deferred run due for its re-check ($1: the re-check interval in ms). Read
   * from the deferred runs (only those of open passes are kept), not from every epoch.
   */
  static final String DUE =
      "SELECT DISTINCT d.epoch_id FROM rollcall.deferred d"
          + " JOIN rollcall.epochs e ON e.id = d.epoch_id"
          + " WHERE e.kind = 'takeover' AND e.state = 'open'"
          + " AND d.deferred_at <= now() - $1::bigint * interval '1 millisecond'";

  private final Databases databases;
  private final Epochs epochs;
  private final Deferrals deferrals;
  private final Classifier classifier;
  private final TornRuns tornRuns;
  private final Verdicts verdicts;
  private final Batches batches;
  private final RunSources sources;
  private final RollcallConfig config;
  private final PassTraces passTraces;
  private final SingleHandOut singleHandOut;

  TakeoverRechecks(
      Databases databases,
      Epochs epochs,
      Deferrals deferrals,
      Classifier classifier,
      TornRuns tornRuns,
      Verdicts verdicts,
      Batches batches,
      RunSources sources,
      RollcallConfig config,
      PassTraces passTraces,
      SingleHandOut singleHandOut) {
    this.singleHandOut = singleHandOut;
    this.databases = databases;
    this.epochs = epochs;
    this.deferrals = deferrals;
    this.classifier = classifier;
    this.tornRuns = tornRuns;
    this.verdicts = verdicts;
    this.batches = batches;
    this.sources = sources;
    this.config = config;
    this.passTraces = passTraces;
  }

  /**
   * Settles the due deferred runs of every open takeover whose lock is free now (one whose lock a
   * claim holds is that claim's to settle); returns how many runs were handed out.
   */
  public Uni<Integer> runOnce() {
    return databases.inTurn(this::runOnce).map(Databases::sum);
  }

  /** {@link #runOnce()} in one database. */
  public Uni<Integer> runOnce(Database db) {
    return Uni.createFrom()
        .deferred(
            () ->
                db.pool()
                    .preparedQuery(DUE)
                    .execute(Tuple.of(config.heartbeatInterval().toMillis())))
        .map(
            rows ->
                StreamSupport.stream(rows.spliterator(), false)
                    .map(r -> r.getLong("epoch_id"))
                    .toList())
        .chain(
            ids ->
                Multi.createFrom()
                    .iterable(ids)
                    .onItem()
                    .transformToUniAndConcatenate(
                        id -> db.pool().withTransaction(conn -> settleIfFree(conn, id)))
                    .collect()
                    .asList()
                    .map(counts -> counts.stream().mapToInt(Integer::intValue).sum()));
  }

  /** One takeover, if its lock is free: its due runs settled, the re-driven ones cut ready. */
  private Uni<Integer> settleIfFree(SqlClient conn, long epochId) {
    return epochs
        .tryLock(conn, epochId)
        .chain(
            locked -> {
              if (locked.isEmpty()
                  || !locked.get().open()
                  || !sources.has(locked.get().namespace())) {
                return Uni.createFrom().item(0);
              }
              Epoch epoch = locked.get();
              RunSource source = sources.get(epoch.namespace());
              return deferrals
                  .due(conn, epoch, MAX_RUNS)
                  .chain(
                      due ->
                          due.isEmpty()
                              ? Uni.createFrom().item(List.<Verdict>of())
                              : settle(conn, source, epoch, due))
                  .chain(
                      runs ->
                          runs.isEmpty()
                              ? epochs.closeIfFinished(conn, epoch.id()).replaceWith(0)
                              : batches
                                  .ready(
                                      conn,
                                      epoch,
                                      Verdicts.handedOut(source, runs),
                                      config.batch().defaultSize())
                                  .replaceWith(runs.size()));
            });
  }

  /**
   * Holding the takeover's lock, its deferred runs {@code due} for their re-check: those a live
   * instance still reports, or whose queued job may still run, stay deferred (due again a heartbeat
   * interval from now); the others are settled as the takeover settles a run, as {@code owner-dead}
   * of its subject, and one deferred with an owner message is re-driven with it while that message
   * still owns its interrupted step; a run another epoch handed out since its deferral is skipped,
   * and one another epoch is handing out right now deferred again ({@link SingleHandOut}). Returns
   * the runs to hand out. The torn writes of the runs no live instance reports any more are mended
   * if the engine wrote nothing to them within the activity fence ({@link TornRuns#recheck}): a
   * live process may have taken a run up since its owner's last report.
   */
  Uni<List<Verdict>> settle(SqlClient conn, RunSource source, Epoch epoch, List<String> due) {
    UUID dead = epoch.subject().orElseThrow();
    return deferrals
        .ownerMessages(conn, epoch.id(), due)
        .chain(
            owners ->
                classifier
                    .takeoverRecheck(
                        conn, source, due, dead, Deferrals.jobMayStillRun(epoch, config.leaseTtl()))
                    .chain(
                        found -> tornRuns.redriveDeferredOwners(conn, source, found, owners, dead)))
        .chain(
            found -> {
              // Every run no live instance reports any more, settled now or waiting for its
              // queued job: a torn run's own job (its one-second re-schedule) keeps it waiting.
              List<Verdict> unreported =
                  found.stream().filter(v -> v.reason() != Reason.OWNED_BY_LIVE_INSTANCE).toList();
              return tornRuns
                  .recheck(
                      conn,
                      new TornRuns.Scope(source, epoch.id(), dead),
                      unreported,
                      config.effectiveActivityFence())
                  // A run still torn (the engine wrote to it within the fence) is not woken into
                  // a replay that cannot go on: it waits, and is mended once quiet.
                  .chain(() -> TornRuns.holdTorn(conn, source, found));
            })
        // Last, after the menders' locks: another instance's takeover may answer for the run.
        .chain(found -> singleHandOut.recheck(conn, epoch, found))
        .call(found -> passTraces.rechecked(conn, epoch, due.size(), found))
        .chain(
            found -> {
              List<Verdict> settled =
                  found.stream().filter(v -> v.disposition() != Disposition.DEFER).toList();
              return deferrals
                  .again(conn, epoch.id(), Verdicts.of(found, Disposition.DEFER))
                  .chain(
                      () ->
                          deferrals.resolve(
                              conn, epoch, settled.stream().map(Verdict::runId).toList()))
                  .chain(() -> verdicts.record(conn, epoch, settled))
                  .replaceWith(Verdicts.of(settled, Disposition.HAND_OUT));
            });
  }
}
