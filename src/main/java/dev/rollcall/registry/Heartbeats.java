package dev.rollcall.registry;

import dev.rollcall.config.RollcallConfig;
import dev.rollcall.database.Database;
import dev.rollcall.database.Databases;
import dev.rollcall.error.DomainException;
import dev.rollcall.error.Problems.InstanceGone;
import dev.rollcall.metrics.RecoveryMetrics;
import dev.rollcall.queue.QueueLocks;
import dev.rollcall.sql.Liveness;
import dev.rollcall.tracing.RecoveryTraces;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Row;
import io.vertx.mutiny.sqlclient.SqlClient;
import io.vertx.mutiny.sqlclient.Tuple;
import jakarta.enterprise.context.ApplicationScoped;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.UUID;
import org.jboss.logging.Logger;

/**
 * Heartbeats and what they learn: each renews its instance's lease by the database's clock, records
 * its session-lock report and in-flight set, adds the queue workers it names, and answers whether
 * recovery work waits for the instance and when a peer's takeover is due. Beats that arrive
 * together are flushed together ({@link Coalescer}).
 */
@ApplicationScoped
public class Heartbeats {

  private static final Logger LOG = Logger.getLogger(Heartbeats.class);

  private final Databases databases;
  private final Ownership ownership;
  private final RollcallConfig config;
  private final RecoveryMetrics metrics;
  private final SessionLiveness sessions;
  private final InstanceGuards guards;
  private final WorkerLearning learning;

  /** One coalescer per database: a flush is one transaction on one database. */
  private final Map<String, Coalescer<Beat, Heartbeat>> beats = new LinkedHashMap<>();

  private final RecoveryTraces traces;

  /** The most heartbeats one flush renews. */
  static final int MAX_BEATS_PER_FLUSH = 1000;

  Heartbeats(
      Databases databases,
      Ownership ownership,
      RollcallConfig config,
      RecoveryMetrics metrics,
      SessionLiveness sessions,
      InstanceGuards guards,
      WorkerLearning workers,
      RecoveryTraces traces) {
    this.traces = traces;
    this.databases = databases;
    this.ownership = ownership;
    this.config = config;
    this.metrics = metrics;
    this.sessions = sessions;
    this.guards = guards;
    this.learning = workers;
    if (config.heartbeatFlushes() < 1) {
      throw new IllegalArgumentException("rollcall.heartbeat-flushes must be at least 1");
    }
    for (Database db : databases.all()) {
      beats.put(
          db.name(),
          new Coalescer<>(
              config.heartbeatFlushes(), MAX_BEATS_PER_FLUSH, flushed -> flush(db, flushed)));
    }
  }

  /**
   * True while an epoch this instance may serve has work a claim could take now: its scan is not
   * finished, a batch is ready or its lease expired, or runs wait for their re-check. Batches other
   * live claimers hold do not count. (For instance row {@code i}.)
   */
  static final String RECOVERY_PENDING =
      "EXISTS (SELECT 1 FROM rollcall.epochs e WHERE e.namespace = i.namespace AND e.state = 'open'"
          + " AND rollcall.serves(e.kind, e.deployment_id, i.deployment_id)"
          + " AND (NOT e.scan_done"
          + "   OR EXISTS (SELECT 1 FROM rollcall.batches b WHERE b.epoch_id = e.id"
          + "     AND rollcall.is_claimable(b.state, b.lease_expires_at))"
          + "   OR EXISTS (SELECT 1 FROM rollcall.deferred d WHERE d.epoch_id = e.id)))";

  /**
   * Milliseconds until the lease of the first live peer of instance row {@code i}'s namespace that
   * holds something to take over (in-flight runs or leased batches) runs out, when that comes
   * before {@code i}'s next heartbeat ({@code $6} ms); negative when it ran out less than {@code
   * $7} ms ago and the reaper has not declared it dead yet. NULL otherwise: no peer is about to
   * die, or the reaper is behind (then the usual heartbeats carry the news, and a stalled reaper
   * never makes every instance beat faster). Healthy peers renew a full lease TTL ahead, so in a
   * steady namespace the range holds no row; the partial index on live leases reads nothing.
   */
  static final String PEER_EXPIRES_IN_MS =
      "(SELECT (extract(epoch FROM min(p.lease_expires_at) - now()) * 1000)::bigint"
          + " FROM rollcall.instances p WHERE p.state = 'live' AND p.namespace = i.namespace"
          + " AND p.id <> i.id"
          + " AND p.lease_expires_at < now() + $6::bigint * interval '1 millisecond'"
          + " AND p.lease_expires_at > now() - $7::bigint * interval '1 millisecond'"
          + " AND (EXISTS (SELECT 1 FROM rollcall.ownership o WHERE o.instance_id = p.id)"
          + "   OR EXISTS (SELECT 1 FROM rollcall.batches b WHERE b.claimer_id = p.id"
          + "     AND b.state IN ('scanning', 'leased'))))";

  /**
   * The most queue worker ids one instance may have (registered, then named in heartbeats); a
   * graphile-worker process has one per unit of its concurrency.
   */
  public static final int MAX_WORKER_IDS = 1000;

  /**
   * After a peer's lease runs out, the reaper needs up to one interval to open its takeover; this
   * much more covers the pass itself.
   */
  static final Duration RECHECK_MARGIN = Duration.ofMillis(100);

  /**
   * The result of a heartbeat. {@code recheckAfterMs}: heartbeat again then, a peer's takeover
   * should be claimable by that time.
   */
  public record Heartbeat(
      OffsetDateTime leaseExpiresAt, boolean recoveryPending, Optional<Long> recheckAfterMs) {}

  /**
   * A flush of heartbeats: renews the leases of the live instances among {@code $1}, by the
   * database's clock, and answers each one's {@code recovery_pending} and {@code
   * peer_expires_in_ms}. Its rows are found by id ({@link Liveness}), so a flush reads the
   * instances it renews, not the fleet ({@code LivenessPlanTest}).
   */
  static final String RENEW =
      "UPDATE rollcall.instances i SET last_heartbeat_at = now(),"
          + " lease_expires_at = now() + $2::bigint * interval '1 millisecond',"
          // Queue workers found since registration join those it has (a process names each
          // worker once it sees it): never replaced, never more than $5.
          + " worker_ids = i.worker_ids || ARRAY(SELECT n.w FROM (SELECT DISTINCT u.w"
          + "   FROM unnest($3::uuid[], $4::text[]) AS u(owner, w)"
          + "   WHERE u.owner = i.id AND u.w <> ALL(i.worker_ids)) n"
          + "   ORDER BY n.w LIMIT greatest(0, $5 - cardinality(i.worker_ids)))"
          + " FROM (SELECT DISTINCT b.id FROM unnest($1::uuid[]) AS b(id)) b"
          + " WHERE i.id = b.id AND "
          + Liveness.liveById("i.")
          + " RETURNING i.id, i.lease_expires_at, cardinality(i.worker_ids) AS workers,"
          // What the row records of the session lock: a beat whose report changes none of it
          // writes nothing more (SessionLiveness.changes).
          + " i.session_lock, i.session_pid, i.session_missing_since IS NOT NULL AS sighted, "
          + RECOVERY_PENDING
          + " AS recovery_pending, "
          + PEER_EXPIRES_IN_MS
          + " AS peer_expires_in_ms";

  /** Heartbeats of this replica waiting for a flush now. */
  int heartbeatsWaiting() {
    return beats.values().stream().mapToInt(Coalescer::waiting).sum();
  }

  /** One heartbeat waiting for its flush. */
  record Beat(
      Caller caller,
      Optional<List<InFlight>> inFlight,
      Optional<SessionLiveness.SessionReport> session,
      List<String> workerIds) {}

  /**
   * Renews the lease of a live instance and, when given, records its session-lock report, adds the
   * queue workers it names and replaces its in-flight set, all in one transaction. The renewal also
   * tells whether recovery work is open for the instance and when a peer's takeover is due.
   *
   * <p>Heartbeats that arrive while {@code rollcall.heartbeat.max-flushes} flushes run go together
   * in the next flush ({@link Coalescer}): one transaction and one renewal statement for all of
   * them, each lease still set by the database's {@code now()} in that statement.
   */
  public Uni<Heartbeat> heartbeat(
      Caller caller,
      Optional<List<InFlight>> inFlight,
      Optional<SessionLiveness.SessionReport> session,
      List<String> workerIds) {
    long started = System.nanoTime();
    return beats
        .get(databases.of(caller.namespace()).name())
        .submit(new Beat(caller, inFlight, session, workerIds))
        .invoke(
            beat ->
                metrics.heartbeat(
                    caller.namespace(), Duration.ofNanos(System.nanoTime() - started)));
  }

  /**
   * Learns the queue workers of the instances of a flush, renewed ones only, from the message ids
   * they reported: one statement per namespace with a queue, after the transaction that stored the
   * sets, so no instance row is locked meanwhile ({@link WorkerLearning}).
   */
  private Uni<Void> learnWorkers(List<Beat> flushed, List<Coalescer.Outcome<Heartbeat>> outcomes) {
    Map<String, List<QueueLocks.Reported>> byNamespace = new LinkedHashMap<>();
    for (int k = 0; k < flushed.size(); k++) {
      Beat b = flushed.get(k);
      if (outcomes.get(k).failure() == null && b.inFlight().isPresent()) {
        List<QueueLocks.Reported> unknown = learning.unknown(b.caller().instanceId(), b.inFlight());
        if (!unknown.isEmpty()) {
          byNamespace
              .computeIfAbsent(b.caller().namespace(), ns -> new ArrayList<>())
              .addAll(unknown);
        }
      }
    }
    return learning.learn(byNamespace);
  }

  /**
   * One flush of heartbeats: a transaction that renews every live instance among them in one
   * statement, then records the session reports and in-flight sets of those it renewed. A beat of
   * an instance that is not live any more fails alone ({@link InstanceGone}). A deadlock (two
   * service replicas renewing the same instances in another order, which only a client retrying on
   * another replica causes) is retried.
   */
  private Uni<List<Coalescer.Outcome<Heartbeat>>> flush(Database db, List<Beat> flushed) {
    metrics.heartbeatFlush(flushed.size());
    return traces.traced(
        RecoveryTraces.HEARTBEAT_FLUSH,
        span ->
            db.withTransaction(conn -> renew(conn, flushed))
                .onFailure(Heartbeats::deadlocked)
                .retry()
                .atMost(2)
                .call(outcomes -> learnWorkers(flushed, outcomes)),
        (span, outcomes) -> RecoveryTraces.flushed(span, flushed.size()));
  }

  private static boolean deadlocked(Throwable failure) {
    return failure instanceof io.vertx.pgclient.PgException pg && "40P01".equals(pg.getSqlState());
  }

  private Uni<List<Coalescer.Outcome<Heartbeat>>> renew(SqlClient conn, List<Beat> flushed) {
    UUID[] ids = flushed.stream().map(b -> b.caller().instanceId()).toArray(UUID[]::new);
    List<UUID> owners = new ArrayList<>();
    List<String> workers = new ArrayList<>();
    Set<UUID> naming = new HashSet<>();
    for (Beat b : flushed) {
      if (!b.workerIds().isEmpty()) {
        naming.add(b.caller().instanceId());
      }
      for (String w : b.workerIds()) {
        owners.add(b.caller().instanceId());
        workers.add(w);
      }
    }
    // Rows are locked in the order of the join, one flush at a time per row: beats of one
    // instance never meet in two flushes of this replica unless its client sent them at once.
    return conn.preparedQuery(RENEW)
        .execute(
            Tuple.tuple(
                List.of(
                    ids,
                    config.leaseTtl().toMillis(),
                    owners.toArray(UUID[]::new),
                    workers.toArray(String[]::new),
                    MAX_WORKER_IDS,
                    config.heartbeatInterval().toMillis(),
                    2 * reaperInterval().toMillis())))
        .chain(
            rows -> {
              Map<UUID, Heartbeat> renewed = new HashMap<>();
              Map<UUID, SessionLiveness.Recorded> recorded = new HashMap<>();
              for (Row row : rows) {
                UUID id = row.getUUID("id");
                recorded.put(
                    id,
                    new SessionLiveness.Recorded(
                        row.getString("session_lock"),
                        row.getInteger("session_pid"),
                        row.getBoolean("sighted")));
                if (row.getInteger("workers") >= MAX_WORKER_IDS && naming.contains(id)) {
                  LOG.warnf(
                      "instance %s names %d queue workers or more; those beyond are not"
                          + " kept, and their locks wait for the orphan release",
                      id, MAX_WORKER_IDS);
                }
                Long peerExpiresInMs = row.getLong("peer_expires_in_ms");
                renewed.put(
                    id,
                    new Heartbeat(
                        row.getOffsetDateTime("lease_expires_at"),
                        row.getBoolean("recovery_pending"),
                        Optional.ofNullable(peerExpiresInMs).map(this::recheckAfterMs)));
              }
              List<UUID> missed =
                  flushed.stream()
                      .map(b -> b.caller().instanceId())
                      .filter(id -> !renewed.containsKey(id))
                      .toList();
              return guards
                  .notLive(conn, missed)
                  .chain(failures -> recordRenewed(conn, flushed, renewed, recorded, failures));
            });
  }

  private Uni<List<Coalescer.Outcome<Heartbeat>>> recordRenewed(
      SqlClient conn,
      List<Beat> flushed,
      Map<UUID, Heartbeat> renewed,
      Map<UUID, SessionLiveness.Recorded> recorded,
      Map<UUID, DomainException> failures) {
    List<Coalescer.Outcome<Heartbeat>> outcomes = new ArrayList<>();
    // Session reports that change what their rows record, all recorded in one statement; the
    // others are not recorded (nor looked into). Of an instance's beats in one flush (a client
    // that sent them at once), the last one's report counts, with a reconnect any of them reported.
    Map<UUID, SessionLiveness.SessionReport> reports = new LinkedHashMap<>();
    List<Beat> reporting = new ArrayList<>();
    for (Beat b : flushed) {
      UUID id = b.caller().instanceId();
      Heartbeat beat = renewed.get(id);
      if (beat == null) {
        outcomes.add(Coalescer.Outcome.failed(failures.get(id)));
        continue;
      }
      outcomes.add(Coalescer.Outcome.of(beat));
      b.session()
          .ifPresent(
              r ->
                  reports.merge(
                      id,
                      r,
                      (was, last) ->
                          new SessionLiveness.SessionReport(
                              last.state(), last.pid(), was.reconnected() || last.reconnected())));
      if (b.inFlight().isPresent()) {
        reporting.add(b);
      }
    }
    reports
        .entrySet()
        .removeIf(e -> !SessionLiveness.changes(e.getValue(), recorded.get(e.getKey())));
    // In the renewal's transaction: a takeover (which locks the row FOR UPDATE) comes after these,
    // and releases what they wrote. Every in-flight set of the flush is replaced by one statement:
    // one round trip per flush, not per beat, whatever the flush holds (up to MAX_BEATS_PER_FLUSH).
    return sessions
        .record(conn, reports)
        .chain(
            () ->
                ownership.replace(
                    conn,
                    reporting.stream()
                        .map(b -> new Ownership.Replacement(b.caller(), b.inFlight().orElseThrow()))
                        .toList()))
        .replaceWith(outcomes);
  }

  /**
   * When the takeover of a peer whose lease runs out in {@code peerExpiresInMs} (negative: ran out
   * that long ago) should be open: one reaper interval and {@link #RECHECK_MARGIN} after the
   * expiry, and not sooner than a quarter interval from now, so that a pass running late costs a
   * few beats at most before the window of {@link #PEER_EXPIRES_IN_MS} closes.
   */
  private long recheckAfterMs(long peerExpiresInMs) {
    return recheckAfterMs(peerExpiresInMs, reaperInterval().toMillis());
  }

  /** {@link #recheckAfterMs(long)} for a reaper running every {@code reaperMs}. */
  static long recheckAfterMs(long peerExpiresInMs, long reaperMs) {
    return Math.max(peerExpiresInMs + reaperMs + RECHECK_MARGIN.toMillis(), reaperMs / 4);
  }

  /**
   * How long after a lease runs out its takeover opens at the latest: the reaper's interval. Off
   * here, another service replica may still reap; its default is assumed.
   */
  private Duration reaperInterval() {
    return config.reaperIntervalOrDefault();
  }

  /**
   * Shortens a live instance's lease to at most {@code graceMs} from now (never lengthens it): an
   * exiting leave's departure grace. False when the instance is not live (its lease ran out, or it
   * ended), so nothing was written.
   */
  public Uni<Boolean> shortenLease(SqlClient client, UUID instanceId, long graceMs) {
    return client
        .preparedQuery(
            "UPDATE rollcall.instances SET lease_expires_at = least(lease_expires_at,"
                + " now() + $2::bigint * interval '1 millisecond')"
                + " WHERE id = $1 AND "
                + Liveness.liveById("")
                + " RETURNING id")
        .execute(Tuple.of(instanceId, graceMs))
        .map(rows -> rows.size() == 1);
  }

  /**
   * After Rollcall's own outage of {@code gapMs} ({@link Outages}): renews to one lease TTL from
   * now the leases of the instances that were live when the service was last seen and heartbeating
   * up to then. A dead one's last beat falls behind, so outages one after another renew it for a
   * TTL at most. Returns how many were renewed.
   */
  Uni<Long> renewLapsedInOutage(SqlClient client, long ttlMs, long gapMs) {
    return client
        .preparedQuery(
            "UPDATE rollcall.instances"
                + " SET lease_expires_at = now() + $1::bigint * interval '1 millisecond'"
                + " WHERE state = 'live'"
                + " AND lease_expires_at < now() + $1::bigint * interval '1 millisecond'"
                + " AND lease_expires_at > now() - $2::bigint * interval '1 millisecond'"
                + " AND last_heartbeat_at > now() - ($2 + $1)::bigint * interval '1 millisecond'")
        .execute(Tuple.of(ttlMs, gapMs))
        .map(r -> (long) r.rowCount());
  }
}
