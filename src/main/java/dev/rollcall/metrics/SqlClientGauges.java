package dev.rollcall.metrics;

import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.Metrics;
import io.micrometer.core.instrument.config.MeterFilter;
import io.micrometer.core.instrument.config.MeterFilterReply;
import jakarta.enterprise.inject.Produces;
import jakarta.inject.Singleton;
import java.util.Set;

/**
 * Drops the two per-connection gauges of the reactive PostgreSQL client, which measure one pooled
 * connection of twenty and warn at every start.
 *
 * <p>Quarkus names the pool's client metrics {@code postgresql|<datasource>}, and Vert.x asks for a
 * new set of client metrics for every connection the pool opens. The timers and counters of each
 * set are the same meters (Micrometer returns the one already registered), but the gauges {@code
 * postgresql.queue.size} and {@code postgresql.current} each read the object of the connection that
 * registered them first: every later connection's registration is ignored, with a WARN ("This Gauge
 * has been already registered"). They would report the first connection only, so they are not
 * registered at all; the pool's own metrics ({@code sql_pool_*}) and the client's timers and
 * counters stay.
 *
 * <p>The Vert.x binder registers its meters on Micrometer's global composite registry, which
 * notices the duplicate (and warns) before any registry Quarkus configured sees it, and before
 * Quarkus asks for its filters: {@link #onGlobalRegistry()} puts the filter on the composite before
 * Quarkus starts; the producer puts it on the registries Quarkus makes.
 */
@Singleton
public class SqlClientGauges {

  /** The client gauges that only ever see the first connection. */
  static final Set<String> PER_CONNECTION = Set.of("postgresql.queue.size", "postgresql.current");

  static final MeterFilter FILTER =
      new MeterFilter() {
        @Override
        public MeterFilterReply accept(Meter.Id id) {
          return id.getType() == Meter.Type.GAUGE && PER_CONNECTION.contains(id.getName())
              ? MeterFilterReply.DENY
              : MeterFilterReply.NEUTRAL;
        }
      };

  /** Filters the global composite registry; called once, before Quarkus starts. */
  public static void onGlobalRegistry() {
    Metrics.globalRegistry.config().meterFilter(FILTER);
  }

  /** The filter Quarkus applies to every registry it makes. */
  @Produces
  @Singleton
  MeterFilter perConnectionGauges() {
    return FILTER;
  }
}
