package dev.rollcall.recovery;

import dev.rollcall.registry.InstanceService;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.quarkus.scheduler.Scheduled;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Pool;
import io.vertx.mutiny.sqlclient.SqlClient;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BiFunction;
import java.util.function.Function;
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
  private final MeterRegistry meters;

  Reaper(Pool pool, InstanceService instances, Takeovers takeovers, MeterRegistry meters) {
    this.pool = pool;
    this.meters = meters;
    this.instances = instances;
    this.takeovers = takeovers;
  }

  @Scheduled(
      identity = "rollcall-reaper",
      every = "${rollcall.reaper-interval:1s}",
      concurrentExecution = Scheduled.ConcurrentExecution.SKIP)
  Uni<Void> scheduled() {
    return survive(runOnce(), "reaper pass");
  }

  /**
   * A scheduled pass that never dies of a failure: logged, and the next pass tries again. The
   * failure decides nothing.
   */
  static Uni<Void> survive(Uni<Pass> pass, String what) {
    return pass.onFailure()
        .invoke(e -> LOG.warnf("%s failed, retrying next pass: %s", what, e.toString()))
        .onFailure()
        .recoverWithNull()
        .replaceWithVoid();
  }

  /** The outcome of one pass. */
  public record Pass(int reaped, int lostRaces, int failed) {}

  /** One pass: tests call it directly instead of waiting for the schedule. */
  public Uni<Pass> runOnce() {
    return instances
        .expired(PER_PASS)
        .chain(
            ids ->
                reapEach(
                    ids, Proof.LEASE_EXPIRED, (conn, id) -> instances.markDeadIfExpired(conn, id)));
  }

  /**
   * Reaps each instance in its own transaction, in order: one that fails is logged and left for the
   * next pass, and never stops the others.
   */
  Uni<Pass> reapEach(
      List<UUID> ids,
      Proof proof,
      BiFunction<SqlClient, UUID, Uni<Optional<InstanceService.Dead>>> death) {
    AtomicInteger reaped = new AtomicInteger();
    AtomicInteger lost = new AtomicInteger();
    AtomicInteger failed = new AtomicInteger();
    return Multi.createFrom()
        .iterable(ids)
        .onItem()
        .transformToUniAndConcatenate(
            id ->
                reap(proof, conn -> death.apply(conn, id))
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
    return reap(Proof.LEASE_EXPIRED, conn -> instances.markDeadIfExpired(conn, instanceId));
  }

  /** What a death rested on; also the instance's {@code end_reason}. */
  public enum Proof {
    LEASE_EXPIRED("lease-expired"),
    SESSION_LOST("session-lost");

    final String label;

    Proof(String label) {
      this.label = label;
    }
  }

  /**
   * Declares one instance dead by {@code death} (a guarded statement: empty when another replica or
   * a heartbeat won) and opens its takeover in the same transaction; counts the death by proof.
   */
  Uni<Boolean> reap(Proof proof, Function<SqlClient, Uni<Optional<InstanceService.Dead>>> death) {
    return pool.withTransaction(
            conn ->
                death
                    .apply(conn)
                    .call(
                        dead ->
                            dead.map(
                                    d ->
                                        takeovers.open(
                                            conn,
                                            new Takeovers.Subject(
                                                d.instanceId(),
                                                d.namespace(),
                                                d.workerIds(),
                                                d.leaseExpiredAt())))
                                .orElse(Uni.createFrom().nullItem())))
        // Counted once committed: a death rolled back with its takeover is retried, not counted.
        .invoke(dead -> dead.ifPresent(d -> declared(proof, d)))
        .map(Optional::isPresent);
  }

  private void declared(Proof proof, InstanceService.Dead d) {
    LOG.infof(
        "instance %s of namespace %s declared dead (%s at %s)",
        d.instanceId(), d.namespace(), proof.label, d.leaseExpiredAt());
    Counter.builder("rollcall.instances.dead")
        .description("Instances declared dead, by the proof the death rested on")
        .tag("namespace", d.namespace())
        .tag("proof", proof.label)
        .register(meters)
        .increment();
  }
}
