package dev.rollcall.registry;

import dev.rollcall.error.Problems.InstanceGone;
import dev.rollcall.error.Problems.Unauthorized;
import dev.rollcall.sql.Liveness;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Pool;
import io.vertx.mutiny.sqlclient.Row;
import io.vertx.mutiny.sqlclient.RowSet;
import io.vertx.mutiny.sqlclient.SqlClient;
import io.vertx.mutiny.sqlclient.Tuple;
import jakarta.enterprise.context.ApplicationScoped;
import java.time.OffsetDateTime;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.stream.StreamSupport;
import org.jboss.logging.Logger;

/**
 * How a live instance ends: it leaves, or it is declared dead when its lease ran out (a lost
 * session lock is {@link SessionLiveness}'s proof). Every end takes the end lock first ({@link
 * InstanceGuards#lockForEnd}), so the instance's claims and completions in progress commit before.
 */
@ApplicationScoped
public class Endings {

  private static final Logger LOG = Logger.getLogger(Endings.class);

  private final Pool pool;
  private final InstanceGuards guards;

  Endings(Pool pool, InstanceGuards guards) {
    this.pool = pool;
    this.guards = guards;
  }

  /** What became of a leave. */
  public enum Departure {
    /** The instance left now: its takeover must be opened. */
    LEFT,
    /** It had left before: nothing to do. */
    ALREADY_LEFT
  }

  /** Marks live instance {@code $1} as left; its row is found by id ({@link Liveness}). */
  static final String MARK_LEFT =
      "UPDATE rollcall.instances SET state = 'left', ended_at = now(),"
          + " end_reason = 'left' WHERE id = $1 AND "
          + Liveness.liveById("")
          + " RETURNING id";

  /**
   * Marks a live instance as left, in the caller's transaction. Leaving twice is harmless; leaving
   * after the lease expired is refused like any act of a dead instance.
   */
  public Uni<Departure> markLeft(SqlClient conn, Caller caller) {
    return guards
        .lockForEnd(conn, caller.instanceId())
        .chain(() -> conn.preparedQuery(MARK_LEFT).execute(Tuple.of(caller.instanceId())))
        .chain(
            rows -> {
              if (rows.size() == 1) {
                LOG.infof("instance %s left namespace %s", caller.instanceId(), caller.namespace());
                return Uni.createFrom().item(Departure.LEFT);
              }
              return conn.preparedQuery("SELECT state FROM rollcall.instances WHERE id = $1")
                  .execute(Tuple.of(caller.instanceId()))
                  .map(
                      state -> {
                        if (state.size() == 0) {
                          throw new Unauthorized(InstanceGuards.UNKNOWN_TOKEN);
                        }
                        if ("left".equals(state.iterator().next().getString("state"))) {
                          return Departure.ALREADY_LEFT;
                        }
                        throw new InstanceGone(caller.instanceId());
                      });
            });
  }

  /**
   * A live instance now declared dead. {@code leaseExpiredAt}: when it died by the proof used, its
   * lease expiry or the first sighting of its lost session.
   */
  public record Dead(
      UUID instanceId, String namespace, List<String> workerIds, OffsetDateTime leaseExpiredAt) {}

  /** Live instances whose lease has expired by the database's clock, oldest first. */
  public Uni<List<UUID>> expired(int limit) {
    return pool.preparedQuery(
            "SELECT id FROM rollcall.instances WHERE rollcall.is_expired(state, lease_expires_at)"
                + " ORDER BY lease_expires_at LIMIT $1")
        .execute(Tuple.of(limit))
        .map(
            rows ->
                StreamSupport.stream(rows.spliterator(), false).map(r -> r.getUUID("id")).toList());
  }

  /**
   * Declares an instance dead if its lease has expired, in the caller's transaction. The guard
   * makes this a race that exactly one service replica wins per instance, and that a heartbeat
   * renewing the lease first wins against all of them: empty means someone else decided.
   */
  public Uni<Optional<Dead>> markDeadIfExpired(SqlClient conn, UUID instanceId) {
    return guards
        .lockForEnd(conn, instanceId)
        .chain(
            () ->
                conn.preparedQuery(
                        "UPDATE rollcall.instances SET state = 'dead', ended_at = now(),"
                            + " end_reason = 'lease-expired'"
                            + " WHERE id = $1 AND rollcall.is_expired(state, lease_expires_at)"
                            + " RETURNING id, namespace, worker_ids, lease_expires_at")
                    .execute(Tuple.of(instanceId)))
        .map(Endings::dead);
  }

  /** The instance a guarded death statement returned, or empty when it lost its race. */
  static Optional<Dead> dead(RowSet<Row> rows) {
    if (rows.size() == 0) {
      return Optional.empty();
    }
    Row r = rows.iterator().next();
    return Optional.of(
        new Dead(
            r.getUUID("id"),
            r.getString("namespace"),
            List.of(r.getArrayOfStrings("worker_ids")),
            r.getOffsetDateTime("lease_expires_at")));
  }

  /** The queue worker ids an instance registered. */
  public Uni<List<String>> workerIds(SqlClient conn, UUID instanceId) {
    return conn.preparedQuery("SELECT worker_ids FROM rollcall.instances WHERE id = $1")
        .execute(Tuple.of(instanceId))
        .map(rows -> List.of(rows.iterator().next().getArrayOfStrings("worker_ids")));
  }
}
