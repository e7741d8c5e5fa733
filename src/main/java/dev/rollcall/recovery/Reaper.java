package dev.rollcall.recovery;

import dev.rollcall.config.Intervals;
import dev.rollcall.config.RollcallConfig;
import dev.rollcall.database.Database;
import dev.rollcall.database.Databases;
import dev.rollcall.metrics.RecoveryMetrics;
import dev.rollcall.queue.QueueLocks;
import dev.rollcall.registry.Endings;
import dev.rollcall.registry.Outages;
import dev.rollcall.source.RunSources;
import dev.rollcall.tracing.RecoveryTraces;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.SqlClient;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BiFunction;
import java.util.function.Function;
import org.jboss.logging.Logger;

/**
 * Finds instances whose lease expired, declares them dead and opens their takeover, every {@code
 * rollcall.reaper-interval}; about twice per activity fence, also releases orphaned queue locks.
 * Each instance is its own transaction, a few at once: one that fails is logged and retried on the
 * next pass, and never stops the others. Any number of service replicas may reap at once; the
 * guarded update lets exactly one win each instance.
 */
@ApplicationScoped
public class Reaper {

  private static final Logger LOG = Logger.getLogger(Reaper.class);

  /** Instances reaped per pass at most; the next pass takes the rest. */
  static final int PER_PASS = 200;

  /**
   * Deaths a pass declares at once, each in its own transaction. One at a time, a mass death (a
   * zone lost, a fleet whose leases ran out together) opened its takeovers at about 22 a second on
   * 2 busy cores, and one death waiting for a lock (an instance's claim in progress) held up every
   * death behind it. Concurrent deaths are safe: they already race across service replicas, and the
   * guarded update lets exactly one transaction win each instance. Kept small so a mass death takes
   * a few of the pool's connections, not all of them.
   */
  static final int AT_ONCE = 4;

  private final Databases databases;
  private final Endings instances;
  private final Outages outages;
  private final Takeovers takeovers;
  private final RunSources sources;
  private final Ledger ledger;
  private final RollcallConfig config;
  private final MeterRegistry meters;
  private final RecoveryTraces traces;
  private final Map<String, AtomicLong> passes = new ConcurrentHashMap<>();

  Reaper(
      Databases databases,
      Endings instances,
      Outages outages,
      Takeovers takeovers,
      RunSources sources,
      Ledger ledger,
      RollcallConfig config,
      MeterRegistry meters,
      RecoveryTraces traces) {
    this.traces = traces;
    this.databases = databases;
    this.instances = instances;
    this.outages = outages;
    this.takeovers = takeovers;
    this.sources = sources;
    this.ledger = ledger;
    this.config = config;
    this.meters = meters;
  }

  /**
   * A beat, then a pass: this replica's coordinator beat first, then the pass. (The schedule's
   * tick, {@link ReaperTick}, runs the pass only when its look after the beat finds an expired
   * lease.) A lease that ran out while no service replica ran, or while the database was
   * unreachable, is renewed by that beat ({@link Outages}) before any lease is read as a death;
   * when the beat fails, no lease is judged in this tick. (Run side by side, a pass of a replica
   * coming back could declare the leases dead that its own first beat was about to renew.)
   */
  public Uni<Pass> tick() {
    return Pass.sum(databases, db -> outages.beat(db).chain(() -> runOnce(db)));
  }

  /**
   * The orphan release, in a flight of its own ({@link ReaperTick}) so that reading the queue never
   * delays a takeover; runs on every {@link #orphanEvery()}-th tick of the reaper's interval, and
   * not at all while no namespace has a queue (there is no lock to look for).
   */
  Uni<Void> scheduledOrphans(Database db) {
    long every = orphanEvery();
    long pass = passes.computeIfAbsent(db.name(), name -> new AtomicLong()).getAndIncrement();
    if (every == 0 || pass % every != 0 || !anyQueue(db)) {
      return Uni.createFrom().voidItem();
    }
    // A turn that cannot be taken (the database is unreachable, say) is logged, and the next
    // interval tries again. (A namespace whose look fails is logged inside the release.)
    return Housekeeping.survive(
        releaseOrphansInTurn(db), "the look for orphaned queue locks in " + db);
  }

  /**
   * The orphan release, if it is this service replica's turn: one replica reads the queue per
   * interval, not every replica. The turn is the {@code orphaned-locks} housekeeping row's lease,
   * won as {@link Housekeeping#takeTurn} says. Empty when another replica holds the turn.
   */
  public Uni<Optional<Integer>> releaseOrphansInTurn() {
    return releaseOrphansInTurn(databases.primary());
  }

  /** {@link #releaseOrphansInTurn()} in one database: its own turn, its own namespaces. */
  public Uni<Optional<Integer>> releaseOrphansInTurn(Database db) {
    long reaperMs = config.reaperIntervalOrDefault().toMillis();
    long turnMs = orphanTurnMs(Math.max(1, orphanEvery()) * reaperMs, reaperMs);
    return Housekeeping.takeTurn(db.pool(), "orphaned-locks", turnMs)
        .chain(
            mine -> {
              meters
                  .counter(
                      "rollcall.queue.orphan.looks", "turn", mine ? "taken" : "another-replica")
                  .increment();
              return mine
                  ? releaseOrphans(db).map(Optional::of)
                  : Uni.createFrom().item(Optional.<Integer>empty());
            });
  }

  /** Whether some namespace of {@code db} has a queue, whose locks may be orphaned. */
  boolean anyQueue(Database db) {
    return db.namespaces().stream().anyMatch(ns -> sources.get(ns).queue().isPresent());
  }

  /**
   * How long a replica's turn to look for orphaned locks lasts, for looks every {@code intervalMs}
   * on a schedule that ticks every {@code tickMs}: half a tick short of the interval, so that the
   * replica that looked last wins its next turn despite its schedule's jitter, and the others take
   * over within one interval and a tick once it stops looking.
   */
  static long orphanTurnMs(long intervalMs, long tickMs) {
    return Math.max(1, intervalMs - tickMs / 2);
  }

  /**
   * Every how many ticks of the reaper's interval orphaned locks are looked for: {@code
   * rollcall.orphaned-locks-interval}, by default about twice per activity fence (a lock is an
   * orphan only once older than the fence), since the look reads the namespace's locked jobs; 0
   * when switched off.
   */
  private long orphanEvery() {
    long reaperMs = config.reaperIntervalOrDefault().toMillis();
    java.time.Duration every =
        config
            .orphanedLocksInterval()
            .map(Intervals::orOff)
            .orElse(Optional.of(config.effectiveActivityFence().dividedBy(2)))
            .orElse(null);
    return every == null ? 0 : Math.max(1, every.toMillis() / Math.max(1, reaperMs));
  }

  /**
   * Releases the orphaned queue locks of every namespace with a queue, each namespace in its own
   * transaction; returns how many were released. Any number of service replicas may run it at once:
   * each lock is released (and recorded) by exactly one. The schedule calls it only in its turn
   * ({@link #releaseOrphansInTurn}); tests call it directly.
   */
  public Uni<Integer> releaseOrphans() {
    return databases.inTurn(this::releaseOrphans).map(Databases::sum);
  }

  /** {@link #releaseOrphans()} in the namespaces of one database. */
  Uni<Integer> releaseOrphans(Database db) {
    return Multi.createFrom()
        .iterable(db.namespaces())
        .map(sources::get)
        .filter(source -> source.queue().isPresent())
        .onItem()
        .transformToUniAndConcatenate(
            source ->
                db.pool()
                    .withTransaction(
                        conn ->
                            source
                                .queue()
                                .get()
                                .releaseOrphanedLocks(conn, config.effectiveActivityFence())
                                .call(
                                    released ->
                                        ledger.locksReleased(
                                            conn,
                                            Ledger.LockRelease.orphaned(source.namespace()),
                                            released)))
                    .invoke(
                        released -> {
                          if (!released.isEmpty()) {
                            LOG.infof(
                                "%d orphaned queue locks released in namespace %s: %s",
                                released.size(),
                                source.namespace(),
                                released.stream().map(QueueLocks.ReleasedLock::jobId).toList());
                            meters
                                .counter(
                                    RecoveryMetrics.LOCKS_RELEASED,
                                    "namespace",
                                    source.namespace(),
                                    "reason",
                                    Reason.ORPHANED_LOCK.wire())
                                .increment(released.size());
                          }
                        })
                    .map(List::size)
                    .onFailure()
                    .invoke(
                        e ->
                            LOG.warnf(
                                "could not release orphaned queue locks of namespace %s: %s",
                                source.namespace(), e.toString()))
                    .onFailure()
                    .recoverWithItem(0))
        .collect()
        .with(java.util.stream.Collectors.summingInt(n -> n));
  }

  /** The outcome of one pass. */
  public record Pass(int reaped, int lostRaces, int failed) {

    /** {@code pass} run in each database one after another, their outcomes added up. */
    static Uni<Pass> sum(Databases dbs, Function<Database, Uni<Pass>> pass) {
      return dbs.inTurn(pass)
          .map(
              passes ->
                  new Pass(
                      passes.stream().mapToInt(Pass::reaped).sum(),
                      passes.stream().mapToInt(Pass::lostRaces).sum(),
                      passes.stream().mapToInt(Pass::failed).sum()));
    }
  }

  /** One pass in every database: tests call it directly instead of waiting for the schedule. */
  public Uni<Pass> runOnce() {
    return Pass.sum(databases, this::runOnce);
  }

  /** One pass in one database: its expired leases, oldest first. */
  public Uni<Pass> runOnce(Database db) {
    return Uni.createFrom()
        .deferred(() -> instances.expired(db.pool(), PER_PASS))
        .chain(
            ids ->
                reapEach(
                    db,
                    ids,
                    Proof.LEASE_EXPIRED,
                    (conn, id) -> instances.markDeadIfExpired(conn, id)));
  }

  /**
   * Reaps each instance in its own transaction, oldest first, {@link #AT_ONCE} at a time: one that
   * fails is logged and left for the next pass, and one that waits (for its claim in progress, say)
   * holds up neither the others nor the pass for longer than its own wait.
   */
  Uni<Pass> reapEach(
      Database db,
      List<UUID> ids,
      Proof proof,
      BiFunction<SqlClient, UUID, Uni<Optional<Endings.Dead>>> death) {
    AtomicInteger reaped = new AtomicInteger();
    AtomicInteger lost = new AtomicInteger();
    AtomicInteger failed = new AtomicInteger();
    return Multi.createFrom()
        .iterable(ids)
        .onItem()
        .transformToUni(
            id ->
                reap(db, proof, conn -> death.apply(conn, id))
                    .invoke(won -> (won ? reaped : lost).incrementAndGet())
                    .onFailure()
                    .invoke(
                        e -> {
                          failed.incrementAndGet();
                          LOG.warnf("could not reap instance %s, retrying next pass: %s", id, e);
                        })
                    .onFailure()
                    .recoverWithItem(false))
        .merge(AT_ONCE)
        .collect()
        .last()
        .map(ignored -> new Pass(reaped.get(), lost.get(), failed.get()));
  }

  /**
   * Declares one instance of the default database dead and opens its takeover; false when another
   * replica won.
   */
  Uni<Boolean> reap(UUID instanceId) {
    return reap(
        databases.primary(),
        Proof.LEASE_EXPIRED,
        conn -> instances.markDeadIfExpired(conn, instanceId));
  }

  /** What a death rested on; also the instance's {@code end_reason}. */
  public enum Proof {
    LEASE_EXPIRED("lease-expired"),
    SESSION_LOST("session-lost");

    final String label;

    Proof(String label) {
      this.label = label;
    }
  }

  /**
   * Declares one instance dead by {@code death} (a guarded statement: empty when another replica or
   * a heartbeat won) and opens its takeover in the same transaction; counts the death by proof.
   */
  Uni<Boolean> reap(
      Database db, Proof proof, Function<SqlClient, Uni<Optional<Endings.Dead>>> death) {
    // The death's trace (RecoveryTraces.Death): written only if this replica wins the death.
    RecoveryTraces.Death trace = traces.death(proof.label);
    return db.withTransaction(
            conn ->
                death
                    .apply(conn)
                    .call(
                        dead ->
                            dead.map(
                                    d ->
                                        takeovers.open(
                                            conn,
                                            new Takeovers.Subject(
                                                d.instanceId(),
                                                d.namespace(),
                                                d.workerIds(),
                                                d.leaseExpiredAt()),
                                            trace.declared(
                                                d.instanceId(),
                                                d.namespace(),
                                                d.leaseExpiredAt(),
                                                d.workerIds())))
                                .orElse(Uni.createFrom().nullItem())))
        // Counted once committed: a death rolled back with its takeover is retried, not counted.
        .invoke(dead -> dead.ifPresent(d -> declared(proof, d)))
        .onItemOrFailure()
        .invoke((dead, failure) -> trace.ended(failure))
        .map(Optional::isPresent);
  }

  private void declared(Proof proof, Endings.Dead d) {
    LOG.infof(
        "instance %s of namespace %s declared dead (%s at %s)",
        d.instanceId(), d.namespace(), proof.label, d.leaseExpiredAt());
    Counter.builder(RecoveryMetrics.INSTANCES_DEAD)
        .description("Instances declared dead, by the proof the death rested on")
        .tag("namespace", d.namespace())
        .tag("proof", proof.label)
        .register(meters)
        .increment();
  }
}
