package dev.rollcall.metrics;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.quarkus.scheduler.Scheduled;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Pool;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.jboss.logging.Logger;

/**
 * Gauges of state that lives in the database, refreshed every few seconds by every replica (they
 * all read the same rows, so they all report the same): open epochs by namespace and kind, the age
 * of the oldest of them, and live instances per namespace ({@code rollcall_epochs}, {@code
 * rollcall_epochs_oldest_age_seconds}, {@code rollcall_instances_live}). The age is what an alert
 * on a pass that does not close needs: a count stays above zero as well while passes follow one
 * another. Only open epochs are counted (an index walk), never every epoch ever created. When a
 * refresh fails the gauges are withdrawn, not left at their last values, the failure is counted
 * ({@code rollcall_state_gauge_failures_total}) and logged at WARN once per streak of failures.
 */
@ApplicationScoped
public class StateGauges {

  private static final Logger LOG = Logger.getLogger(StateGauges.class);

  private final Pool pool;
  private final MeterRegistry registry;
  private final Map<String, Published> values = new ConcurrentHashMap<>();
  private final Counter failures;
  private final AtomicBoolean failing = new AtomicBoolean();

  private record Published(AtomicLong value, Meter.Id id) {}

  /** The age of the oldest open epoch of a kind, in whole seconds by the database's clock. */
  private static final String OLDEST = "rollcall.epochs.oldest.age";

  StateGauges(Pool pool, MeterRegistry registry) {
    this.pool = pool;
    this.registry = registry;
    this.failures = registry.counter("rollcall.state.gauge.failures");
  }

  @Scheduled(
      identity = "rollcall-state-gauges",
      every = "${rollcall.metrics-refresh:5s}",
      concurrentExecution = Scheduled.ConcurrentExecution.SKIP)
  Uni<Void> scheduled() {
    return refresh().onFailure().recoverWithNull();
  }

  /** Reads the state and publishes it; on failure withdraws the gauges and fails. */
  public Uni<Void> refresh() {
    return pool.query(
            "SELECT 'epochs' AS metric, namespace, kind, count(*) AS n,"
                + " extract(epoch FROM now() - min(created_at))::bigint AS age"
                + " FROM rollcall.epochs WHERE state = 'open' GROUP BY namespace, kind"
                + " UNION ALL SELECT 'live', namespace, '', count(*), NULL FROM rollcall.instances"
                + " WHERE rollcall.is_live(state, lease_expires_at) GROUP BY namespace")
        .execute()
        .invoke(
            rows -> {
              values.values().forEach(v -> v.value().set(0));
              rows.forEach(
                  r -> {
                    if ("epochs".equals(r.getString("metric"))) {
                      String namespace = r.getString("namespace");
                      String kind = r.getString("kind");
                      gauge("rollcall.epochs", namespace, kind).set(r.getLong("n"));
                      // Zero once no epoch of the kind is open, like the count beside it.
                      gauge(OLDEST, namespace, kind).set(Math.max(0, r.getLong("age")));
                    } else {
                      gauge("rollcall.instances.live", r.getString("namespace"), null)
                          .set(r.getLong("n"));
                    }
                  });
              if (failing.compareAndSet(true, false)) {
                LOG.info("state gauges refreshed again");
              }
            })
        .onFailure()
        .invoke(
            e -> {
              failures.increment();
              // Stale values would read as the truth: withdraw them until a refresh succeeds.
              values.values().forEach(v -> registry.remove(v.id()));
              values.clear();
              if (failing.compareAndSet(false, true)) {
                LOG.warnf("state gauges withdrawn, their refresh failed: %s", e.toString());
              } else {
                LOG.debugf("state gauges still not refreshed: %s", e.toString());
              }
            })
        .replaceWithVoid();
  }

  private AtomicLong gauge(String name, String namespace, String kind) {
    String key = name + "|" + namespace + "|" + kind;
    return values
        .computeIfAbsent(
            key,
            k -> {
              AtomicLong value = new AtomicLong();
              Gauge.Builder<AtomicLong> b =
                  Gauge.builder(name, value, AtomicLong::get).tag("namespace", namespace);
              if (OLDEST.equals(name)) {
                b.tag("kind", kind)
                    .baseUnit("seconds")
                    .description("Age of the oldest open epoch of the kind, 0 when none is open");
              } else if (kind != null) {
                b.tag("kind", kind).tag("state", "open");
              }
              return new Published(value, b.register(registry).getId());
            })
        .value();
  }
}
