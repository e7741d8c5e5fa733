package dev.rollcall.registry;

import dev.rollcall.error.Problems.InstanceGone;
import dev.rollcall.error.Problems.Unauthorized;
import dev.rollcall.sql.Liveness;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Row;
import io.vertx.mutiny.sqlclient.RowSet;
import io.vertx.mutiny.sqlclient.SqlClient;
import io.vertx.mutiny.sqlclient.Tuple;
import jakarta.enterprise.context.ApplicationScoped;
import java.time.OffsetDateTime;
import java.util.ArrayList;
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

  private final InstanceGuards guards;

  Endings(InstanceGuards guards) {
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

  /** Whether some live instance's lease has expired by the database's clock ({@link #expired}). */
  public static final String ANY_EXPIRED =
      "EXISTS (SELECT 1 FROM rollcall.instances WHERE rollcall.is_expired(state, lease_expires_at))";

  /** Live instances whose lease has expired by the database's clock, oldest first. */
  public Uni<List<UUID>> expired(SqlClient client, int limit) {
    return client
        .preparedQuery(
            "SELECT id FROM rollcall.instances WHERE rollcall.is_expired(state, lease_expires_at)"
                + " ORDER BY lease_expires_at LIMIT $1")
        .execute(Tuple.of(limit))
        .map(
            rows ->
                StreamSupport.stream(rows.spliterator(), false).map(r -> r.getUUID("id")).toList());
  }

  /**
   * What a death rests on, as the one death statement ({@link #declareDead}) checks it: the {@code
   * end_reason} it writes, the condition on the instance's row {@code i} under which the proof
   * still holds ($1 is the instance, {@code params} are $2 on), and the moment the instance died by
   * it (null for none).
   */
  public record DeathProof(
      String endReason, String stillHolds, String diedAt, List<Object> params) {}

  /** Its lease ran out, by the database's clock. */
  static final DeathProof LEASE_EXPIRED =
      new DeathProof(
          "lease-expired",
          "rollcall.is_expired(i.state, i.lease_expires_at)",
          "i.lease_expires_at",
          List.of());

  /** An operator declared it dead while it was live; it has no moment of death but now. */
  public static final DeathProof EVICTED =
      new DeathProof("evicted", "i.state = 'live'", "NULL::timestamptz", List.of());

  /** The death statement of {@code proof}: guarded by the proof, so that exactly one end wins. */
  static String death(DeathProof proof) {
    return "UPDATE rollcall.instances i SET state = 'dead', ended_at = now(), end_reason = '"
        + proof.endReason()
        + "' WHERE i.id = $1 AND "
        + proof.stillHolds()
        + " RETURNING i.id, i.namespace, i.worker_ids, "
        + proof.diedAt()
        + " AS lease_expires_at";
  }

  /**
   * Declares a live instance dead if {@code proof} still holds, in the caller's transaction: the
   * one place an instance dies, for the reaper (its lease), the session check (its lost session)
   * and an operator's eviction. The guard makes this a race that exactly one service replica wins
   * per instance, and that a heartbeat renewing the lease first wins against all of them: empty
   * means someone else decided.
   */
  public Uni<Optional<Dead>> declareDead(SqlClient conn, UUID instanceId, DeathProof proof) {
    List<Object> params = new ArrayList<>(1 + proof.params().size());
    params.add(instanceId);
    params.addAll(proof.params());
    // The end lock first, as for every end: the instance's claims and completions in progress
    // commit before its death (and the takeover opened in the same transaction) can release what
    // they lease.
    return guards
        .lockForEnd(conn, instanceId)
        .chain(() -> conn.preparedQuery(death(proof)).execute(Tuple.tuple(params)))
        .map(Endings::dead);
  }

  /** Declares an instance dead if its lease has expired ({@link #declareDead}). */
  public Uni<Optional<Dead>> markDeadIfExpired(SqlClient conn, UUID instanceId) {
    return declareDead(conn, instanceId, LEASE_EXPIRED);
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
