package dev.rollcall.recovery;

import dev.rollcall.config.RollcallConfig;
import io.quarkus.scheduler.Scheduled;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Pool;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.ArrayList;
import java.util.List;

/**
 * Closes boot epochs nobody can finish: their deployment has had no live instance for longer than
 * {@code rollcall.stranded-epoch-grace}; and boot epochs a later deploy's pass superseded, which
 * its creator closes right after creating it, should that creator have died in between ({@link
 * Epochs#closeSuperseded}). Runs on the reaper's interval, on every service replica (each close is
 * one guarded update, so replicas racing close each epoch once).
 */
@ApplicationScoped
public class StrandedEpochs {

  private final Pool pool;
  private final Epochs epochs;
  private final RollcallConfig config;

  StrandedEpochs(Pool pool, Epochs epochs, RollcallConfig config) {
    this.pool = pool;
    this.epochs = epochs;
    this.config = config;
  }

  @Scheduled(
      identity = "rollcall-stranded-epochs",
      every = "${rollcall.reaper-interval:1s}",
      concurrentExecution = Scheduled.ConcurrentExecution.SKIP)
  Uni<Void> scheduled() {
    return Housekeeping.survive(runOnce(), "stranded-epoch check");
  }

  /**
   * One pass over every namespace with an open boot epoch (one read finds them; a service at rest
   * has none); returns the epochs it closed. Tests call it directly.
   */
  public Uni<List<Long>> runOnce() {
    return epochs
        .withOpenBoot(pool, config.namespaces().keySet())
        .onItem()
        .transformToMulti(namespaces -> Multi.createFrom().iterable(namespaces))
        .onItem()
        .transformToUniAndConcatenate(
            ns ->
                pool.withTransaction(conn -> epochs.closeSuperseded(conn, ns))
                    .chain(
                        superseded ->
                            pool.withTransaction(conn -> epochs.closeStranded(conn, ns, graceMs()))
                                .map(
                                    stranded -> {
                                      List<Long> closed = new ArrayList<>(superseded);
                                      closed.addAll(stranded);
                                      return closed;
                                    })))
        .onItem()
        .transformToIterable(closed -> closed)
        .collect()
        .asList();
  }

  /** The grace in milliseconds. */
  long graceMs() {
    return config.strandedEpochGrace().toMillis();
  }
}
