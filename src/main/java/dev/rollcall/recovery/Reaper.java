package dev.rollcall.recovery;

import dev.rollcall.registry.InstanceService;
import io.quarkus.scheduler.Scheduled;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Pool;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import org.jboss.logging.Logger;

/**
 * Finds instances whose lease expired, declares them dead and opens their takeover, every {@code
 * rollcall.reaper-interval}. Each instance is its own transaction: one that fails is logged and
 * retried on the next pass, and never stops the others. Any number of service replicas may reap at
 * once; the guarded update lets exactly one win each instance.
 */
@ApplicationScoped
public class Reaper {

  private static final Logger LOG = Logger.getLogger(Reaper.class);

  /** Instances reaped per pass at most; the next pass takes the rest. */
  static final int PER_PASS = 200;

  private final Pool pool;
  private final InstanceService instances;
  private final Takeovers takeovers;

  Reaper(Pool pool, InstanceService instances, Takeovers takeovers) {
    this.pool = pool;
    this.instances = instances;
    this.takeovers = takeovers;
  }

  @Scheduled(
      identity = "rollcall-reaper",
      every = "${rollcall.reaper-interval:1s}",
      concurrentExecution = Scheduled.ConcurrentExecution.SKIP)
  Uni<Void> scheduled() {
    return runOnce()
        .onFailure()
        .invoke(e -> LOG.warnf("reaper pass failed, retrying next pass: %s", e.toString()))
        .onFailure()
        .recoverWithNull()
        .replaceWithVoid();
  }

  /** The outcome of one pass. */
  public record Pass(int reaped, int lostRaces, int failed) {}

  /** One pass: tests call it directly instead of waiting for the schedule. */
  public Uni<Pass> runOnce() {
    AtomicInteger reaped = new AtomicInteger();
    AtomicInteger lost = new AtomicInteger();
    AtomicInteger failed = new AtomicInteger();
    return instances
        .expired(PER_PASS)
        .onItem()
        .transformToMulti(ids -> Multi.createFrom().iterable(ids))
        .onItem()
        .transformToUniAndConcatenate(
            id ->
                reap(id)
                    .invoke(won -> (won ? reaped : lost).incrementAndGet())
                    .onFailure()
                    .invoke(
                        e -> {
                          failed.incrementAndGet();
                          LOG.warnf("could not reap instance %s, retrying next pass: %s", id, e);
                        })
                    .onFailure()
                    .recoverWithItem(false))
        .collect()
        .last()
        .map(ignored -> new Pass(reaped.get(), lost.get(), failed.get()));
  }

  /** Declares one instance dead and opens its takeover; false when another replica won. */
  Uni<Boolean> reap(UUID instanceId) {
    return pool.withTransaction(
        conn ->
            instances
                .markDeadIfExpired(conn, instanceId)
                .chain(
                    dead -> {
                      if (dead.isEmpty()) {
                        return Uni.createFrom().item(false);
                      }
                      InstanceService.Dead d = dead.get();
                      LOG.infof(
                          "instance %s of namespace %s declared dead (lease expired at %s)",
                          d.instanceId(), d.namespace(), d.leaseExpiredAt());
                      return takeovers
                          .open(
                              conn,
                              new Takeovers.Subject(
                                  d.instanceId(), d.namespace(), d.workerIds(), d.leaseExpiredAt()))
                          .replaceWith(true);
                    }));
  }
}
