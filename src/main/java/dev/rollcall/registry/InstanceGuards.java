package dev.rollcall.registry;

import dev.rollcall.error.DomainException;
import dev.rollcall.error.Problems.InstanceGone;
import dev.rollcall.error.Problems.Unauthorized;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.SqlClient;
import io.vertx.mutiny.sqlclient.Tuple;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;

/**
 * The two row locks that order an instance's end after its work: a claim or a completion takes
 * {@link #requireLive} ({@code FOR KEY SHARE}), every end (a leave, a death by lease or by lost
 * session, an eviction) takes {@link #lockForEnd} ({@code FOR UPDATE}) first, so that no claim or
 * completion commits work leased to an instance whose takeover has already released what it held.
 * And the one answer to an act of an instance that is not live ({@link #notLive}).
 */
@ApplicationScoped
public class InstanceGuards {

  static final String UNKNOWN_TOKEN = "the instance token is not known";

  /**
   * The liveness check of claims and completions. {@code FOR KEY SHARE} conflicts with the {@code
   * FOR UPDATE} that {@link #END_LOCK} takes before an instance is declared dead or left, but not
   * with a heartbeat's lease update (a {@code FOR NO KEY UPDATE}): heartbeats never queue behind
   * their instance's claims.
   */
  static final String LIVE_CHECK =
      "SELECT rollcall.is_live(state, lease_expires_at) AS live FROM rollcall.instances"
          + " WHERE id = $1 FOR KEY SHARE";

  /**
   * Taken before an instance is declared dead or left: waits for its claims and completions in
   * progress (see {@link #LIVE_CHECK}), so that none of them commits work leased to an instance
   * whose takeover has already released what it held.
   */
  static final String END_LOCK = "SELECT 1 FROM rollcall.instances WHERE id = $1 FOR UPDATE";

  /** Takes the end lock of the instance's row for the rest of the caller's transaction. */
  public Uni<Void> lockForEnd(SqlClient conn, UUID instanceId) {
    return conn.preparedQuery(END_LOCK).execute(Tuple.of(instanceId)).replaceWithVoid();
  }

  /**
   * Fails with {@link InstanceGone} unless the instance is live now, and as an unknown token
   * ({@link Unauthorized}) when retention has deleted it: the answer an uncached token lookup
   * gives, so that a replica that has the token in its cache answers the same. The row is
   * key-share-locked for the rest of the transaction, so the instance cannot be declared dead
   * half-way through a claim or a completion, while its heartbeats go through.
   */
  public Uni<Void> requireLive(SqlClient client, UUID instanceId) {
    return client
        .preparedQuery(LIVE_CHECK)
        .execute(Tuple.of(instanceId))
        .map(
            rows -> {
              if (rows.size() == 0) {
                throw new Unauthorized(UNKNOWN_TOKEN);
              }
              if (!rows.iterator().next().getBoolean("live")) {
                throw new InstanceGone(instanceId);
              }
              return null;
            });
  }

  /**
   * Why instances that were not renewed failed: {@link InstanceGone} for those that left or died,
   * and an unknown token ({@link Unauthorized}) for those retention has deleted, which is what an
   * uncached token lookup answers.
   */
  Uni<Map<UUID, DomainException>> notLive(SqlClient conn, List<UUID> instanceIds) {
    if (instanceIds.isEmpty()) {
      return Uni.createFrom().item(Map.of());
    }
    return conn.preparedQuery("SELECT id FROM rollcall.instances WHERE id = ANY($1::uuid[])")
        .execute(Tuple.of(instanceIds.toArray(UUID[]::new)))
        .map(
            rows -> {
              Set<UUID> present = new HashSet<>();
              rows.forEach(row -> present.add(row.getUUID("id")));
              Map<UUID, DomainException> failures = new HashMap<>();
              for (UUID id : instanceIds) {
                failures.put(
                    id,
                    present.contains(id) ? new InstanceGone(id) : new Unauthorized(UNKNOWN_TOKEN));
              }
              return failures;
            });
  }

  /** {@link #notLive(SqlClient, List)} of one instance, as a failure. */
  public <T> Uni<T> notLive(SqlClient conn, UUID instanceId) {
    return notLive(conn, List.of(instanceId))
        .chain(failures -> Uni.createFrom().failure(failures.get(instanceId)));
  }
}
