package dev.rollcall.recovery;

import dev.rollcall.config.Intervals;
import dev.rollcall.config.RollcallConfig;
import dev.rollcall.source.RunSource;
import dev.rollcall.source.RunSources;
import io.quarkus.scheduler.Scheduled;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Pool;
import jakarta.enterprise.context.ApplicationScoped;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import org.jboss.logging.Logger;

/**
 * Opens a {@code sweep} epoch per namespace every {@code rollcall.sweep.interval}: runs stranded
 * between deploys (a lost wake-up, say) are found and handed to live instances through the usual
 * claims, rate-bounded. Each namespace is its own transaction, so one failing source never stops
 * the others; any number of service replicas may run it.
 */
@ApplicationScoped
public class Sweeper {

  private static final Logger LOG = Logger.getLogger(Sweeper.class);

  private final Pool pool;
  private final RunSources sources;
  private final Epochs epochs;
  private final StrandedEpochs stranded;
  private final RollcallConfig config;

  Sweeper(
      Pool pool,
      RunSources sources,
      Epochs epochs,
      StrandedEpochs stranded,
      RollcallConfig config) {
    this.pool = pool;
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
    return Housekeeping.survive(runOnce(), "sweep pass");
  }

  /** One pass over every namespace; returns the sweeps it opened. Tests call it directly. */
  public Uni<List<Epoch>> runOnce() {
    long intervalMs = interval().toMillis();
    return Multi.createFrom()
        .iterable(sources.all())
        .onItem()
        .transformToUniAndConcatenate(
            source ->
                open(source, intervalMs)
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

  private Uni<Optional<Epoch>> open(RunSource source, long intervalMs) {
    return pool.withTransaction(
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
