package dev.rollcall.metrics;

import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.quarkus.scheduler.Scheduled;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Pool;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.jboss.logging.Logger;

/**
 * Gauges of state that lives in the database, refreshed every few seconds by every replica (they
 * all read the same rows, so they all report the same): epochs by namespace, kind and state, and
 * live instances per namespace ({@code rollcall_epochs}, {@code rollcall_instances_live}).
 */
@ApplicationScoped
public class StateGauges {

  private static final Logger LOG = Logger.getLogger(StateGauges.class);

  private final Pool pool;
  private final MeterRegistry registry;
  private final Map<String, AtomicLong> values = new ConcurrentHashMap<>();

  StateGauges(Pool pool, MeterRegistry registry) {
    this.pool = pool;
    this.registry = registry;
  }

  @Scheduled(
      identity = "rollcall-state-gauges",
      every = "${rollcall.metrics-refresh:5s}",
      concurrentExecution = Scheduled.ConcurrentExecution.SKIP)
  Uni<Void> refresh() {
    return pool.query(
            "SELECT 'epochs' AS metric, namespace, kind, state, count(*) AS n"
                + " FROM rollcall.epochs GROUP BY namespace, kind, state"
                + " UNION ALL SELECT 'live', namespace, '', '', count(*) FROM rollcall.instances"
                + " WHERE state = 'live' AND lease_expires_at > now() GROUP BY namespace")
        .execute()
        .invoke(
            rows -> {
              values.values().forEach(v -> v.set(0));
              rows.forEach(
                  r -> {
                    if ("epochs".equals(r.getString("metric"))) {
                      gauge(
                              "rollcall.epochs",
                              r.getString("namespace"),
                              "kind",
                              r.getString("kind"),
                              "state",
                              r.getString("state"))
                          .set(r.getLong("n"));
                    } else {
                      gauge(
                              "rollcall.instances.live",
                              r.getString("namespace"),
                              null,
                              null,
                              null,
                              null)
                          .set(r.getLong("n"));
                    }
                  });
            })
        .onFailure()
        .invoke(e -> LOG.debugf("state gauges not refreshed: %s", e.toString()))
        .onFailure()
        .recoverWithNull()
        .replaceWithVoid();
  }

  private AtomicLong gauge(
      String name, String namespace, String k1, String v1, String k2, String v2) {
    String key = name + "|" + namespace + "|" + v1 + "|" + v2;
    return values.computeIfAbsent(
        key,
        k -> {
          AtomicLong value = new AtomicLong();
          Gauge.Builder<AtomicLong> b =
              Gauge.builder(name, value, AtomicLong::get).tag("namespace", namespace);
          if (k1 != null) {
            b.tag(k1, v1).tag(k2, v2);
          }
          b.register(registry);
          return value;
        });
  }
}
