package dev.rollcall.recovery;

import dev.rollcall.config.Intervals;
import dev.rollcall.config.RollcallConfig;
import dev.rollcall.database.Database;
import dev.rollcall.database.Databases;
import dev.rollcall.registry.SessionLiveness;
import dev.rollcall.registry.SessionLiveness.Rules;
import io.quarkus.runtime.ShutdownEvent;
import io.quarkus.runtime.StartupEvent;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.core.Vertx;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.event.Observes;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;

/**
 * The fast path of the reaper: every {@code rollcall.liveness.check-interval}, instances whose
 * session lock is gone ({@link SessionLiveness}) are declared dead with proof {@code session-lost}
 * and their takeover opened, by the reaper's own per-instance transaction. A check whose query
 * fails decides nothing (Rollcall's own connection trouble is never evidence); several service
 * replicas may check at once, and the guarded death statement lets one win each instance.
 *
 * <p>A service with no armed lock (at rest, or with clients that hold none) has nothing to check: a
 * check that finds none armed ({@link SessionLiveness#ANY_ARMED}) makes the next ticks skip,
 * without a statement, until the reaper's look finds a lock armed ({@link ReaperTick}, every reaper
 * interval) or a heartbeat of this replica records one held ({@link SessionLiveness#heldRecords}).
 * Nothing is lost meanwhile: no lock is a proof of death within the session grace after it was
 * recorded held, and the replica that recorded it checks at once. A replica that runs no reaper has
 * no look, and checks at every tick.
 */
@ApplicationScoped
public class SessionReaper {

  private final SessionLiveness sessions;
  private final Reaper reaper;
  private final RollcallConfig config;
  private final Vertx vertx;
  private final Databases databases;
  private final boolean idles;
  private final Map<String, Watch> watches = new ConcurrentHashMap<>();
  private final Map<String, AtomicBoolean> running = new ConcurrentHashMap<>();
  private long timer = -1;

  SessionReaper(
      SessionLiveness sessions,
      Reaper reaper,
      RollcallConfig config,
      Vertx vertx,
      Databases databases) {
    this.vertx = vertx;
    this.sessions = sessions;
    this.reaper = reaper;
    this.config = config;
    this.databases = databases;
    this.idles = Intervals.orOff(config.reaperInterval()).isPresent();
  }

  /** The watch of one database: each database's locks are armed or not on their own. */
  private Watch watch(Database db) {
    return watches.computeIfAbsent(db.name(), name -> new Watch(idles));
  }

  /**
   * When a tick checks: always, until a check or a look has found no lock armed; then again once a
   * look finds one armed or a heartbeat records one held. Only the decision, no clock.
   */
  static final class Watch {

    private final boolean idles;
    private volatile boolean armed = true;
    private volatile long heldRecordsSeen = -1;

    /** {@code idles}: whether a look of the reaper's runs at all, to wake the checks. */
    Watch(boolean idles) {
      this.idles = idles;
    }

    /** Whether a tick checks, with {@code heldRecords} the replica's count of held records. */
    boolean due(long heldRecords) {
      return !idles || armed || heldRecords != heldRecordsSeen;
    }

    /** A check that started at {@code heldRecords} found a lock armed, or none. */
    void checked(long heldRecords, boolean armed) {
      this.heldRecordsSeen = heldRecords;
      this.armed = armed;
    }

    /** The reaper's look found a lock armed, or none. */
    void looked(boolean armed) {
      this.armed = armed;
    }
  }

  /**
   * What the reaper's look in {@code db} found ({@link ReaperTick}): whether some lock is armed.
   */
  void looked(Database db, boolean armed) {
    watch(db).looked(armed);
  }

  /**
   * Starts the periodic check. A Vert.x timer, not {@code @Scheduled}: Quarkus' scheduler fires an
   * {@code every} shorter than one second only once a second, which would cost up to a second of
   * detection.
   */
  void start(@Observes StartupEvent started) {
    config
        .liveness()
        .checkEvery()
        .ifPresent(every -> timer = vertx.setPeriodic(every.toMillis(), id -> tick()));
  }

  void stop(@Observes ShutdownEvent stopping) {
    if (timer >= 0) {
      vertx.cancelTimer(timer);
    }
  }

  /**
   * One check at a time in this replica: a tick that finds one running is skipped, and so is one
   * with nothing armed to check ({@link Watch}).
   */
  private void tick() {
    long heldRecords = sessions.heldRecords();
    for (Database db : databases.serving()) {
      Watch watch = watch(db);
      AtomicBoolean flight = running.computeIfAbsent(db.name(), name -> new AtomicBoolean());
      if (!watch.due(heldRecords) || !flight.compareAndSet(false, true)) {
        continue;
      }
      Housekeeping.survive(
              runOnce(db, Rules.of(config), check -> watch.checked(heldRecords, check.armed())),
              "session check in " + db)
          .subscribe()
          .with(ignored -> flight.set(false), failure -> flight.set(false));
    }
  }

  /** One check with the rules in force. */
  public Uni<Reaper.Pass> runOnce() {
    return runOnce(Rules.of(config));
  }

  /**
   * One check in every database with the given rules: tests call it directly instead of waiting for
   * the schedule.
   */
  public Uni<Reaper.Pass> runOnce(Rules rules) {
    return Reaper.Pass.sum(databases, db -> runOnce(db, rules, check -> {}));
  }

  private Uni<Reaper.Pass> runOnce(Database db, Rules rules, Consumer<SessionLiveness.Check> seen) {
    return Uni.createFrom()
        .deferred(() -> sessions.check(db.pool(), rules, Reaper.PER_PASS))
        .invoke(seen)
        .chain(
            check ->
                reaper.reapEach(
                    db,
                    check.lost(),
                    Reaper.Proof.SESSION_LOST,
                    (conn, id) -> sessions.markDeadIfSessionLost(conn, id, rules)));
  }
}
