package dev.rollcall.recovery;

import dev.rollcall.config.Intervals;
import dev.rollcall.config.RollcallConfig;
import dev.rollcall.database.Database;
import dev.rollcall.database.Databases;
import dev.rollcall.registry.Endings;
import dev.rollcall.registry.Outages;
import dev.rollcall.registry.SessionLiveness;
import io.quarkus.scheduler.Scheduled;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Row;
import io.vertx.mutiny.sqlclient.SqlClient;
import io.vertx.mutiny.sqlclient.Tuple;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Singleton;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Supplier;

/**
 * Every job on the reaper's interval, in one tick: the coordinator beat ({@link Outages}), then, in
 * the beat's transaction, one look that says which jobs have anything to do, then those jobs. A
 * service at rest (no expired lease, no deferred run due, no open boot epoch, no stale statistics)
 * thus runs one transaction per interval, whatever its number of namespaces, where each job read
 * for itself before: five transactions a second, each a wake-up of the scheduler.
 *
 * <p>Each job runs in a flight of its own, as it did on a schedule of its own: one still running
 * when the next tick finds work for it is left to finish, and the next ticks look again; a job
 * never waits for another (a mass death being reaped holds up no re-check). The orphaned-lock look
 * takes its own flight every tick, before the beat, since the beat does not decide it. As before,
 * no lease is judged in a tick whose beat failed: the look runs only after the beat succeeded, and
 * sees the leases the beat renewed.
 */
@ApplicationScoped
class ReaperTick {

  /** What the look found: which jobs have something to do, and whether a session lock is armed. */
  record Look(
      boolean expired,
      boolean rechecksDue,
      boolean openBoot,
      boolean staleStatistics,
      boolean armed) {}

  /**
   * The look: each job's own test for work, as the job states it ($1: the heartbeat interval in ms,
   * for the deferred runs' re-check; $2: the configured namespaces).
   */
  static final String LOOK =
      "SELECT "
          + Endings.ANY_EXPIRED
          + " AS expired, EXISTS ("
          + TakeoverRechecks.DUE
          + ") AS rechecks_due, "
          + StrandedEpochs.anyOpenBoot("$2")
          + " AS open_boot, "
          + FreshStatistics.ANY_STALE
          + " AS stale_statistics, "
          + SessionLiveness.ANY_ARMED
          + " AS armed";

  private final Outages outages;
  private final Reaper reaper;
  private final TakeoverRechecks rechecks;
  private final StrandedEpochs stranded;
  private final FreshStatistics statistics;
  private final SessionReaper sessions;
  private final RollcallConfig config;
  private final Databases databases;
  private final Map<String, Flights> flights = new ConcurrentHashMap<>();

  /** Each job's flight in one database: a slow or unreachable database holds up only its own. */
  private static final class Flights {
    final AtomicBoolean tick = new AtomicBoolean();
    final AtomicBoolean reaping = new AtomicBoolean();
    final AtomicBoolean rechecking = new AtomicBoolean();
    final AtomicBoolean closing = new AtomicBoolean();
    final AtomicBoolean analyzing = new AtomicBoolean();
    final AtomicBoolean orphans = new AtomicBoolean();
  }

  ReaperTick(
      Outages outages, Reaper reaper, Jobs jobs, SessionReaper sessions, Databases databases) {
    this.databases = databases;
    this.outages = outages;
    this.reaper = reaper;
    this.rechecks = jobs.rechecks;
    this.stranded = jobs.stranded;
    this.statistics = jobs.statistics;
    this.sessions = sessions;
    this.config = jobs.config;
  }

  /**
   * The jobs a look may start, with the settings of the look. A singleton: its fields are read
   * directly, which a client proxy's would not answer.
   */
  @Singleton
  static class Jobs {
    final TakeoverRechecks rechecks;
    final StrandedEpochs stranded;
    final FreshStatistics statistics;
    final RollcallConfig config;

    Jobs(
        TakeoverRechecks rechecks,
        StrandedEpochs stranded,
        FreshStatistics statistics,
        RollcallConfig config) {
      this.rechecks = rechecks;
      this.stranded = stranded;
      this.statistics = statistics;
      this.config = config;
    }
  }

  @Scheduled(
      identity = "rollcall-reaper",
      every = Intervals.REAPER_SCHEDULE,
      concurrentExecution = Scheduled.ConcurrentExecution.SKIP)
  Uni<Void> scheduled() {
    // Each database ticks in a flight of its own: one whose beat hangs (its server unreachable)
    // delays no other database's beat, look or jobs.
    for (Database db : databases.serving()) {
      Flights f = flights(db);
      launch(f.orphans, () -> reaper.scheduledOrphans(db), "the look for orphaned queue locks");
      launch(f.tick, () -> tick(db), "reaper pass in " + db);
    }
    return Uni.createFrom().voidItem();
  }

  private Flights flights(Database db) {
    return flights.computeIfAbsent(db.name(), name -> new Flights());
  }

  /** A tick of the default database ({@link #tick(Database)}). */
  Uni<Look> tick() {
    return tick(databases.primary());
  }

  /**
   * One tick in one database: the beat and its look, then the jobs the look found work for, each
   * started in its flight (not awaited). Returns the look. Tests call it instead of waiting for the
   * schedule.
   */
  Uni<Look> tick(Database db) {
    return outages
        .beat(db, conn -> look(db, conn))
        .map(Outages.BeatAnd::found)
        .invoke(look -> start(db, look));
  }

  Uni<Look> look(Database db, SqlClient conn) {
    return conn.preparedQuery(LOOK)
        .execute(Tuple.of(config.heartbeatInterval().toMillis(), db.namespaceArray()))
        .map(
            rows -> {
              Row r = rows.iterator().next();
              return new Look(
                  r.getBoolean("expired"),
                  r.getBoolean("rechecks_due"),
                  r.getBoolean("open_boot"),
                  r.getBoolean("stale_statistics"),
                  r.getBoolean("armed"));
            });
  }

  /**
   * Starts the jobs {@code look} found work for in {@code db}; tells the session checks what it
   * saw.
   */
  private void start(Database db, Look look) {
    Flights f = flights(db);
    sessions.looked(db, look.armed());
    if (look.expired()) {
      launch(f.reaping, () -> reaper.runOnce(db), "reaper pass in " + db);
    }
    if (look.rechecksDue()) {
      launch(f.rechecking, () -> rechecks.runOnce(db), "takeover re-checks in " + db);
    }
    if (look.openBoot()) {
      launch(f.closing, () -> stranded.runOnce(db), "stranded-epoch check in " + db);
    }
    if (look.staleStatistics()) {
      launch(f.analyzing, () -> statistics.runOnce(db), "statistics check in " + db);
    }
  }

  /**
   * Runs {@code job} unless its flight is still running; a failure is logged and decides nothing.
   */
  private static void launch(AtomicBoolean flight, Supplier<Uni<?>> job, String what) {
    if (!flight.compareAndSet(false, true)) {
      return;
    }
    Housekeeping.survive(Uni.createFrom().deferred(job), what)
        .subscribe()
        .with(ignored -> flight.set(false), failure -> flight.set(false));
  }
}
