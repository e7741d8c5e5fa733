package dev.rollcall.recovery;

import dev.rollcall.config.RollcallConfig;
import dev.rollcall.database.Databases;
import dev.rollcall.registry.Caller;
import dev.rollcall.registry.Endings;
import dev.rollcall.registry.Endings.Departure;
import dev.rollcall.registry.Heartbeats;
import dev.rollcall.registry.InFlight;
import dev.rollcall.registry.InstanceGuards;
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

  private final Databases databases;
  private final Endings instances;
  private final InstanceGuards guards;
  private final Ownership ownership;
  private final Takeovers takeovers;
  private final Heartbeats heartbeats;
  private final RollcallConfig config;

  Departures(
      Databases databases,
      Endings instances,
      InstanceGuards guards,
      Ownership ownership,
      Takeovers takeovers,
      Heartbeats heartbeats,
      RollcallConfig config) {
    this.config = config;
    this.heartbeats = heartbeats;
    this.databases = databases;
    this.instances = instances;
    this.guards = guards;
    this.ownership = ownership;
    this.takeovers = takeovers;
  }

  /**
   * An exiting leave: the process stops executing only when it exits, right after this answers, so
   * releasing its queue locks now could let a peer replay a run it is still executing. The last
   * in-flight set is recorded and the lease shortened to the departure grace (never lengthened);
   * the reaper then declares the instance dead and opens its takeover, queue locks and all, as for
   * a crash. Refused like any act of a dead instance once the lease has run out.
   */
  public Uni<Void> exiting(Caller caller, Optional<List<InFlight>> lastInFlight) {
    long graceMs = config.departureGrace().toMillis();
    return pool(caller)
        .withTransaction(
            conn ->
                heartbeats
                    .shortenLease(conn, caller.instanceId(), graceMs)
                    .chain(
                        shortened -> {
                          if (!shortened) {
                            return guards.<Void>notLive(conn, caller.instanceId());
                          }
                          return lastInFlight
                              .map(set -> ownership.replace(conn, caller, set))
                              .orElse(Uni.createFrom().voidItem());
                        }));
  }

  /** Leaves; {@code lastInFlight}, when given, replaces the reported in-flight set first. */
  public Uni<Void> leave(Caller caller, Optional<List<InFlight>> lastInFlight) {
    return pool(caller)
        .withTransaction(
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
                                          .chain(
                                              () -> instances.workerIds(conn, caller.instanceId()))
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

  /** The caller's database's pool: its instance row, runs and queue are there. */
  private Pool pool(Caller caller) {
    return databases.of(caller.namespace()).pool();
  }
}
