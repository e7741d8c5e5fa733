package dev.rollcall.recovery;

import dev.rollcall.registry.Caller;
import dev.rollcall.registry.InFlight;
import dev.rollcall.registry.InstanceService;
import dev.rollcall.registry.InstanceService.Departure;
import dev.rollcall.registry.Ownership;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Pool;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.List;
import java.util.Optional;

/**
 * A graceful leave: in one transaction the instance reports its last in-flight set, is marked left
 * (fenced), and its takeover opens at once, so peers get its runs on their next claim.
 */
@ApplicationScoped
public class Departures {

  private final Pool pool;
  private final InstanceService instances;
  private final Ownership ownership;
  private final Takeovers takeovers;

  Departures(Pool pool, InstanceService instances, Ownership ownership, Takeovers takeovers) {
    this.pool = pool;
    this.instances = instances;
    this.ownership = ownership;
    this.takeovers = takeovers;
  }

  /** Leaves; {@code lastInFlight}, when given, replaces the reported in-flight set first. */
  public Uni<Void> leave(Caller caller, Optional<List<InFlight>> lastInFlight) {
    return pool.withTransaction(
        conn ->
            Uni.createFrom()
                .voidItem()
                .chain(
                    () ->
                        instances
                            .markLeft(conn, caller)
                            .chain(
                                departure -> {
                                  if (departure == Departure.ALREADY_LEFT) {
                                    return Uni.createFrom().voidItem();
                                  }
                                  Uni<Void> reported =
                                      lastInFlight
                                          .map(set -> ownership.replace(conn, caller, set))
                                          .orElse(Uni.createFrom().voidItem());
                                  return reported
                                      .chain(() -> instances.workerIds(conn, caller.instanceId()))
                                      .chain(
                                          workers ->
                                              takeovers.open(
                                                  conn,
                                                  new Takeovers.Subject(
                                                      caller.instanceId(),
                                                      caller.namespace(),
                                                      workers,
                                                      null)))
                                      .replaceWithVoid();
                                })));
  }
}
