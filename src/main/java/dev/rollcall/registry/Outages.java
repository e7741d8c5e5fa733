package dev.rollcall.registry;

import dev.rollcall.config.Intervals;
import dev.rollcall.config.RollcallConfig;
import io.micrometer.core.instrument.MeterRegistry;
import io.quarkus.runtime.StartupEvent;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Pool;
import io.vertx.mutiny.sqlclient.SqlClient;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.event.Observes;
import java.time.Duration;
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

  private final Pool pool;
  private final RollcallConfig config;
  private final MeterRegistry meters;
  private final Heartbeats leases;
  private volatile boolean beaten;

  Outages(Pool pool, RollcallConfig config, MeterRegistry meters, Heartbeats leases) {
    this.pool = pool;
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
   * row (a first beat ever, or one deleted) is no outage.
   */
  public Uni<Beat> beat() {
    return beat(conn -> Uni.createFrom().nullItem()).map(BeatAnd::beat);
  }

  /**
   * A beat, as {@link #beat()}, and {@code after} in the same transaction once the beat (and any
   * renewal) is written: a read that must see the leases as the beat left them, without a
   * transaction of its own.
   */
  public <T> Uni<BeatAnd<T>> beat(Function<SqlClient, Uni<T>> after) {
    long outageMs = outageAfter().toMillis();
    long ttlMs = config.leaseTtl().toMillis();
    return pool.withTransaction(
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
        .invoke(done -> report(done.beat()))
        .invoke(() -> beaten = true);
  }

  /** True once a beat of this replica succeeded, or when it runs no reaper (and so never beats). */
  boolean beatenOrNotBeating() {
    return beaten || Intervals.orOff(config.reaperInterval()).isEmpty();
  }

  private void report(Beat beat) {
    if (beat.renewed() > 0 || beat.gapMs() > outageAfter().toMillis()) {
      meters.counter("rollcall.coordinator.outages").increment();
      LOG.infof(
          "no service replica ran for %d ms: %d live leases renewed, so that none is declared dead"
              + " for the service's absence",
          beat.gapMs(), beat.renewed());
    }
  }

  /** Before the first request: the first replica back renews the leases that lapsed meanwhile. */
  void onStart(@Observes StartupEvent event) {
    if (Intervals.orOff(config.reaperInterval()).isPresent()) {
      try {
        beat().await().atMost(Duration.ofSeconds(30));
      } catch (RuntimeException e) {
        // The database may not be up yet: the scheduled beats will find the gap.
        LOG.warnf("the first beat failed (%s); the reaper's schedule beats again", e.getMessage());
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
