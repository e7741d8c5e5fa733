package dev.rollcall.metrics;

import dev.rollcall.database.Database;
import dev.rollcall.database.Databases;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.quarkus.scheduler.Scheduled;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Tuple;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
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

  private final Databases databases;
  private final MeterRegistry registry;
  private final Map<String, Published> values = new ConcurrentHashMap<>();
  private final Counter failures;

  /** The databases whose last refresh failed (their gauges withdrawn). */
  private final Set<String> failing = ConcurrentHashMap.newKeySet();

  private record Published(String namespace, AtomicLong value, Meter.Id id) {}

  /** The age of the oldest open epoch of a kind, in whole seconds by the database's clock. */
  private static final String OLDEST = "rollcall.epochs.oldest.age";

  StateGauges(Databases databases, MeterRegistry registry) {
    this.databases = databases;
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

  /**
   * Reads the state of every database and publishes it; a database whose read fails has its gauges
   * withdrawn (the others' stay), and the refresh fails once all have been tried.
   */
  public Uni<Void> refresh() {
    List<Uni<Void>> each = new ArrayList<>();
    for (Database db : databases.all()) {
      each.add(refresh(db));
    }
    return Uni.join().all(each).andCollectFailures().replaceWithVoid();
  }

  private Uni<Void> refresh(Database db) {
    Set<String> namespaces = Set.copyOf(db.namespaces());
    return Uni.createFrom()
        .deferred(
            () ->
                db.pool()
                    .preparedQuery(
                        "SELECT 'epochs' AS metric, namespace, kind, count(*) AS n,"
                            + " extract(epoch FROM now() - min(created_at))::bigint AS age"
                            + " FROM rollcall.epochs WHERE state = 'open'"
                            + " AND namespace = ANY($1::text[]) GROUP BY namespace, kind"
                            + " UNION ALL SELECT 'live', namespace, '', count(*), NULL"
                            + " FROM rollcall.instances WHERE namespace = ANY($1::text[])"
                            + " AND rollcall.is_live(state, lease_expires_at) GROUP BY namespace")
                    .execute(Tuple.of(db.namespaceArray())))
        .invoke(
            rows -> {
              values.values().stream()
                  .filter(v -> namespaces.contains(v.namespace()))
                  .forEach(v -> v.value().set(0));
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
              if (failing.remove(db.name())) {
                LOG.infof("state gauges of %s refreshed again", db);
              }
            })
        .onFailure()
        .invoke(
            e -> {
              failures.increment();
              // Stale values would read as the truth: withdraw them until a refresh succeeds.
              values
                  .entrySet()
                  .removeIf(
                      entry -> {
                        boolean its = namespaces.contains(entry.getValue().namespace());
                        if (its) {
                          registry.remove(entry.getValue().id());
                        }
                        return its;
                      });
              if (failing.add(db.name())) {
                LOG.warnf(
                    "state gauges of %s withdrawn, their refresh failed: %s", db, e.toString());
              } else {
                LOG.debugf("state gauges of %s still not refreshed: %s", db, e.toString());
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
              return new Published(namespace, value, b.register(registry).getId());
            })
        .value();
  }
}
