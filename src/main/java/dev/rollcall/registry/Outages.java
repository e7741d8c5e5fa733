package dev.rollcall.registry;

import dev.rollcall.config.Intervals;
import dev.rollcall.config.RollcallConfig;
import dev.rollcall.database.Database;
import dev.rollcall.database.Databases;
import io.micrometer.core.instrument.MeterRegistry;
import io.quarkus.runtime.StartupEvent;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.SqlClient;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.event.Observes;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;
import org.eclipse.microprofile.health.HealthCheck;
import org.eclipse.microprofile.health.HealthCheckResponse;
import org.eclipse.microprofile.health.Readiness;
import org.jboss.logging.Logger;

/**
 * Rollcall's own outages are no evidence against anyone: a lease that ran out while no service
 * replica was running (or while the database was unreachable) ran out because nobody could answer
 * its heartbeats. Every replica that runs a reaper beats {@code rollcall.coordinator_beat} on the
 * reaper's schedule and once when it starts, before it serves a request; the beat that finds the
 * last one older than {@link #outageAfter} renews every live instance's lease to one lease TTL from
 * now, in the same transaction, so that no live instance is declared dead, or refused its next
 * heartbeat, for the service's absence or the database's. An instance that really died meanwhile is
 * found by its session lock within seconds (the session rule has its own guards), else when the
 * renewed lease runs out.
 */
@ApplicationScoped
public class Outages {

  private static final Logger LOG = Logger.getLogger(Outages.class);

  /** What one beat found: the gap since the last one, and the leases it renewed (0 most times). */
  public record Beat(long gapMs, long renewed) {}

  /** A beat, and what the work run in its transaction after it found ({@link #beat(Function)}). */
  public record BeatAnd<T>(Beat beat, T found) {}

  private final Databases databases;
  private final RollcallConfig config;
  private final MeterRegistry meters;
  private final Heartbeats leases;
  private final Set<String> beaten = ConcurrentHashMap.newKeySet();

  Outages(Databases databases, RollcallConfig config, MeterRegistry meters, Heartbeats leases) {
    this.databases = databases;
    this.leases = leases;
    this.config = config;
    this.meters = meters;
  }

  /**
   * A gap between beats longer than this is an outage: three reaper intervals (a replica's own
   * schedule may slip by one or two). Even a short outage counts, shorter than a lease: heartbeats
   * sent while the database was away come back as failures or time out, and an instance's next
   * heartbeat may come a heartbeat interval or a request time-out after the return, past a lease
   * that had only seconds left when the database went away (a 4 s PostgreSQL restart declared two
   * live replicas dead this way). The beat that finds the gap gives every lease that was valid when
   * the service was last seen a whole TTL from the return.
   */
  Duration outageAfter() {
    return config.reaperIntervalOrDefault().multipliedBy(3);
  }

  /**
   * Locks the beat row (one replica decides at a time), renews the live leases when the last beat
   * is older than the outage bound, and beats. One transaction; every time is the database's. No
   * row (a first beat ever, or one deleted) is no outage. Each database has its own beat: an outage
   * of one database renews the leases of its instances alone.
   */
  public Uni<Beat> beat(Database db) {
    return beat(db, conn -> Uni.createFrom().nullItem()).map(BeatAnd::beat);
  }

  /** A beat of the default database ({@link #beat(Database)}). */
  public Uni<Beat> beat() {
    return beat(databases.primary());
  }

  /**
   * A beat, as {@link #beat()}, and {@code after} in the same transaction once the beat (and any
   * renewal) is written: a read that must see the leases as the beat left them, without a
   * transaction of its own.
   */
  public <T> Uni<BeatAnd<T>> beat(Database db, Function<SqlClient, Uni<T>> after) {
    long outageMs = outageAfter().toMillis();
    long ttlMs = config.leaseTtl().toMillis();
    return db.withTransaction(
            conn ->
                conn.preparedQuery(
                        "SELECT (extract(epoch FROM now() - beat_at) * 1000)::bigint AS gap_ms"
                            + " FROM rollcall.coordinator_beat FOR UPDATE")
                    .execute()
                    .chain(
                        rows -> {
                          long gap =
                              rows.size() == 0 ? 0 : rows.iterator().next().getLong("gap_ms");
                          Uni<Long> renewed =
                              gap <= outageMs
                                  ? Uni.createFrom().item(0L)
                                  : leases.renewLapsedInOutage(conn, ttlMs, gap);
                          return renewed.chain(
                              n ->
                                  conn.preparedQuery(
                                          "INSERT INTO rollcall.coordinator_beat (beat_at) VALUES (now())"
                                              + " ON CONFLICT (one) DO UPDATE SET beat_at = now()")
                                      .execute()
                                      .replaceWith(new Beat(gap, n)));
                        })
                    .chain(beat -> after.apply(conn).map(found -> new BeatAnd<>(beat, found))))
        .invoke(done -> report(db, done.beat()))
        .invoke(() -> beaten.add(db.name()));
  }

  /**
   * True once a beat of this replica succeeded in some database, or when it runs no reaper (and so
   * never beats). One database is enough: a replica is not kept from the namespaces of the
   * databases that answer by one that does not.
   */
  boolean beatenOrNotBeating() {
    return !beaten.isEmpty() || Intervals.orOff(config.reaperInterval()).isEmpty();
  }

  private void report(Database db, Beat beat) {
    if (beat.renewed() > 0 || beat.gapMs() > outageAfter().toMillis()) {
      meters.counter("rollcall.coordinator.outages", "database", db.name()).increment();
      LOG.infof(
          "no service replica ran on %s for %d ms: %d live leases renewed, so that none is"
              + " declared dead for the service's absence",
          db, beat.gapMs(), beat.renewed());
    }
  }

  /**
   * Before the first request: the first replica back renews the leases that lapsed meanwhile, in
   * each database, all at once.
   */
  void onStart(@Observes StartupEvent event) {
    if (Intervals.orOff(config.reaperInterval()).isPresent()) {
      List<Uni<Void>> beats = new ArrayList<>();
      for (Database db : databases.serving()) {
        beats.add(
            beat(db)
                .replaceWithVoid()
                .onFailure()
                .invoke(
                    e ->
                        // The database may not be up yet: the scheduled beats will find the gap.
                        LOG.warnf(
                            "the first beat of %s failed (%s); the reaper's schedule beats again",
                            db, e.getMessage()))
                .onFailure()
                .recoverWithNull());
      }
      if (beats.isEmpty()) {
        return;
      }
      try {
        Uni.join().all(beats).andCollectFailures().await().atMost(Duration.ofSeconds(30));
      } catch (RuntimeException e) {
        LOG.warnf("the first beats did not all end in 30 s (%s); the schedule beats again", e);
      }
    }
  }

  /**
   * Not ready before this replica's first beat: a replica coming back after Rollcall's own outage
   * renews the leases that lapsed meanwhile before a balancer sends it the heartbeats of their
   * instances.
   */
  @Readiness
  @ApplicationScoped
  static class BeatReadiness implements HealthCheck {

    private final Outages outages;

    BeatReadiness(Outages outages) {
      this.outages = outages;
    }

    @Override
    public HealthCheckResponse call() {
      return HealthCheckResponse.named("rollcall-coordinator-beat")
          .status(outages.beatenOrNotBeating())
          .build();
    }
  }
}
