package dev.rollcall.recovery;

import dev.rollcall.config.Intervals;
import dev.rollcall.config.RollcallConfig;
import dev.rollcall.database.Database;
import dev.rollcall.database.Databases;
import dev.rollcall.source.RunSource;
import dev.rollcall.source.RunSources;
import io.quarkus.scheduler.Scheduled;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Tuple;
import jakarta.enterprise.context.ApplicationScoped;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import org.jboss.logging.Logger;

/**
 * Opens a {@code sweep} epoch per namespace every {@code rollcall.sweep.interval}: runs stranded
 * between deploys (a lost wake-up, say) are found and handed to live instances through the usual
 * claims, rate-bounded. Each namespace is its own transaction, so one failing source never stops
 * the others; any number of service replicas may run it. Only the namespaces where a sweep could
 * open, or a stranded boot epoch be closed, are visited ({@link #visits}).
 */
@ApplicationScoped
public class Sweeper {

  private static final Logger LOG = Logger.getLogger(Sweeper.class);

  private final Databases databases;
  private final RunSources sources;
  private final Epochs epochs;
  private final StrandedEpochs stranded;
  private final RollcallConfig config;

  Sweeper(
      Databases databases,
      RunSources sources,
      Epochs epochs,
      StrandedEpochs stranded,
      RollcallConfig config) {
    this.databases = databases;
    this.sources = sources;
    this.epochs = epochs;
    this.stranded = stranded;
    this.config = config;
  }

  @Scheduled(
      identity = "rollcall-sweeper",
      every = Intervals.SWEEP_SCHEDULE,
      concurrentExecution = Scheduled.ConcurrentExecution.SKIP)
  Uni<Void> scheduled() {
    return Housekeeping.inEach(databases, this::runOnce, "sweep pass");
  }

  /**
   * One pass over every namespace of every database; returns the sweeps it opened. Tests call it
   * directly.
   */
  public Uni<List<Epoch>> runOnce() {
    return databases.inTurn(this::runOnce).map(Databases::flat);
  }

  /** One pass over the namespaces of one database; returns the sweeps it opened. */
  public Uni<List<Epoch>> runOnce(Database db) {
    long intervalMs = interval().toMillis();
    return visits(db)
        .onItem()
        .transformToMulti(namespaces -> Multi.createFrom().iterable(namespaces))
        .map(sources::get)
        .onItem()
        .transformToUniAndConcatenate(
            source ->
                open(db, source, intervalMs)
                    .onFailure()
                    .invoke(
                        e ->
                            LOG.warnf(
                                "could not open a sweep of namespace %s: %s",
                                source.namespace(), e.toString()))
                    .onFailure()
                    .recoverWithItem(Optional.empty()))
        .filter(Optional::isPresent)
        .map(Optional::get)
        .collect()
        .asList();
  }

  /**
   * The namespaces a pass opens its transaction in: those with a live instance (a sweep opens only
   * where one is live: {@link Epochs#openSweep}) or with an open boot epoch (which the pass closes
   * first if it is stranded). One statement for every namespace, so that a pass over namespaces
   * nobody runs in (a service at rest) reads no runs table and takes no transaction per namespace.
   * In the order of the configured sources. (The default database's, {@link #visits(Database)}.)
   */
  Uni<List<String>> visits() {
    return visits(databases.primary());
  }

  /** {@link #visits()} among the namespaces of one database. */
  Uni<List<String>> visits(Database db) {
    List<String> all = db.namespaces();
    return Uni.createFrom()
        .deferred(
            () ->
                db.pool()
                    .preparedQuery(
                        "SELECT namespace FROM rollcall.instances WHERE namespace = ANY($1::text[])"
                            + " AND rollcall.is_live(state, lease_expires_at)"
                            + " UNION SELECT namespace FROM rollcall.epochs WHERE namespace = ANY($1::text[])"
                            + " AND kind = 'boot' AND state = 'open'")
                    .execute(Tuple.of(db.namespaceArray())))
        .map(
            rows -> {
              Set<String> found = new HashSet<>();
              rows.forEach(r -> found.add(r.getString("namespace")));
              return all.stream().filter(found::contains).toList();
            });
  }

  private Uni<Optional<Epoch>> open(Database db, RunSource source, long intervalMs) {
    return db.pool()
        .withTransaction(
            conn ->
                // A stranded boot pass would block the sweep: close it first, so a sweep is never
                // held back for longer than the grace.
                stranded
                    .closeStranded(conn, source.namespace(), config.strandedEpochGrace().toMillis())
                    .chain(() -> source.snapshot(conn))
                    .chain(
                        snapshot ->
                            epochs.openSweep(
                                conn,
                                source.namespace(),
                                snapshot,
                                intervalMs,
                                // Two lease TTLs: the replicas of a deploy register within it.
                                2 * config.leaseTtl().toMillis()))
                    .call(
                        opened ->
                            opened.isPresent()
                                ? epochs.prepare(conn, source, opened.get().id())
                                : Uni.createFrom().voidItem()));
  }

  /** The configured interval; {@code off} sweeps never run on their own (but tests may). */
  private Duration interval() {
    return Intervals.orDefault(config.sweep().interval(), Intervals.SWEEP_DEFAULT);
  }
}
