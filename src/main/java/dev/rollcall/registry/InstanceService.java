package dev.rollcall.registry;

import dev.rollcall.config.RollcallConfig;
import dev.rollcall.error.DomainException;
import dev.rollcall.error.Problems.Forbidden;
import dev.rollcall.error.Problems.InstanceGone;
import dev.rollcall.error.Problems.Unauthorized;
import dev.rollcall.error.Problems.UnknownNamespace;
import dev.rollcall.metrics.RecoveryMetrics;
import dev.rollcall.queue.QueueLocks;
import dev.rollcall.source.RunSources;
import dev.rollcall.sql.Liveness;
import io.smallrye.mutiny.Uni;
import io.vertx.core.buffer.Buffer;
import io.vertx.mutiny.sqlclient.Pool;
import io.vertx.mutiny.sqlclient.Row;
import io.vertx.mutiny.sqlclient.RowSet;
import io.vertx.mutiny.sqlclient.SqlClient;
import io.vertx.mutiny.sqlclient.Tuple;
import jakarta.enterprise.context.ApplicationScoped;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.UUID;
import java.util.stream.StreamSupport;
import org.jboss.logging.Logger;

/**
 * Instances and their leases. An instance is live while {@code state = 'live'} and its lease has
 * not expired by the database's clock: the SQL function {@code rollcall.is_live} is that rule (and
 * {@code rollcall.is_expired} its complement the reaper acts on); every statement that acts on
 * liveness decides it itself, so two service replicas can never disagree about whether an instance
 * is live.
 */
@ApplicationScoped
public class InstanceService {

  private static final Logger LOG = Logger.getLogger(InstanceService.class);

  private final Pool pool;
  private final Ownership ownership;
  private final RunSources sources;
  private final RollcallConfig config;
  private final RecoveryMetrics metrics;
  private final SessionLiveness sessions;
  private final Coalescer<Beat, Heartbeat> beats;
  private final TokenCache tokens = new TokenCache(TokenCache.DEFAULT_CAPACITY);
  private final FoundMessages found = new FoundMessages(FoundMessages.DEFAULT_CAPACITY);

  /** The most heartbeats one flush renews. */
  static final int MAX_BEATS_PER_FLUSH = 1000;

  private static final String UNKNOWN_TOKEN = "the instance token is not known";

  InstanceService(
      Pool pool,
      Ownership ownership,
      RunSources sources,
      RollcallConfig config,
      RecoveryMetrics metrics,
      SessionLiveness sessions) {
    this.pool = pool;
    this.sessions = sessions;
    this.ownership = ownership;
    this.sources = sources;
    this.config = config;
    this.metrics = metrics;
    if (config.heartbeatFlushes() < 1) {
      throw new IllegalArgumentException("rollcall.heartbeat-flushes must be at least 1");
    }
    this.beats = new Coalescer<>(config.heartbeatFlushes(), MAX_BEATS_PER_FLUSH, this::flush);
  }

  /** Registers a new instance after checking the namespace's registration secret. */
  public Uni<Registration> register(
      String secret,
      String namespace,
      String deploymentId,
      String name,
      List<String> workerIds,
      Optional<List<InFlight>> inFlight) {
    RollcallConfig.NamespaceConfig ns = config.namespaces().get(namespace);
    if (ns == null) {
      return Uni.createFrom().failure(new UnknownNamespace(namespace));
    }
    if (!Tokens.constantTimeEquals(ns.registrationSecret(), secret)) {
      return Uni.createFrom()
          .failure(
              new Unauthorized(
                  "the registration secret of namespace '" + namespace + "' is wrong"));
    }
    String token = Tokens.generate();
    // The first in-flight set comes with the registration, in the same transaction, so that the
    // instance's own first claim can never hand out the runs it is already executing.
    return pool.withTransaction(
            conn ->
                insert(conn, namespace, deploymentId, name, workerIds, token)
                    .call(
                        registered ->
                            inFlight
                                .map(
                                    set ->
                                        ownership.replace(
                                            conn,
                                            new Caller(
                                                registered.instanceId(), namespace, deploymentId),
                                            set))
                                .orElse(Uni.createFrom().voidItem())))
        .call(registered -> learnWorkers(namespace, reported(registered.instanceId(), inFlight)));
  }

  private Uni<Registration> insert(
      SqlClient conn,
      String namespace,
      String deploymentId,
      String name,
      List<String> workerIds,
      String token) {
    return conn.preparedQuery(
            "INSERT INTO rollcall.instances"
                + " (id, namespace, deployment_id, name, worker_ids, token_hash, lease_expires_at)"
                + " VALUES (gen_random_uuid(), $1, $2, $3, $4, $5,"
                + " now() + $6::bigint * interval '1 millisecond')"
                + " RETURNING id, lease_expires_at,"
                + " rollcall.session_lock_objid(id) AS session_lock_objid")
        .execute(
            Tuple.of(
                namespace,
                deploymentId,
                name,
                workerIds.toArray(String[]::new),
                Buffer.buffer(Tokens.hash(token)),
                config.leaseTtl().toMillis()))
        .map(
            rows -> {
              Row row = rows.iterator().next();
              UUID id = row.getUUID("id");
              LOG.infof(
                  "instance %s registered in namespace %s (deployment %s, name %s)",
                  id, namespace, deploymentId, name);
              return new Registration(
                  id,
                  token,
                  row.getOffsetDateTime("lease_expires_at"),
                  row.getInteger("session_lock_objid"));
            });
  }

  /** The instance a bearer token belongs to, whatever its state. */
  public Uni<Caller> authenticate(String token) {
    if (token == null || !token.startsWith(Tokens.PREFIX) || token.length() > 100) {
      return Uni.createFrom().failure(new Unauthorized("an instance token is required"));
    }
    byte[] hash = Tokens.hash(token);
    Caller known = tokens.get(hash);
    if (known != null) {
      return Uni.createFrom().item(known);
    }
    return pool.preparedQuery(
            "SELECT id, namespace, deployment_id FROM rollcall.instances WHERE token_hash = $1")
        .execute(Tuple.of(Buffer.buffer(hash)))
        .map(
            rows -> {
              if (rows.size() == 0) {
                throw new Unauthorized(UNKNOWN_TOKEN);
              }
              Row row = rows.iterator().next();
              Caller caller =
                  new Caller(
                      row.getUUID("id"),
                      row.getString("namespace"),
                      row.getString("deployment_id"));
              tokens.put(hash, caller);
              return caller;
            });
  }

  /** Refuses a caller acting on another instance's resource. */
  public static void requireSelf(Caller caller, UUID instanceId) {
    if (!caller.instanceId().equals(instanceId)) {
      throw new Forbidden("this token belongs to another instance");
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
   * After a peer's lease runs out, the reaper needs up to one interval to open its takeover; this
   * much more covers the pass itself.
   */
  /**
   * The most queue worker ids one instance may have (registered, then named in heartbeats); a
   * graphile-worker process has one per unit of its concurrency.
   */
  public static final int MAX_WORKER_IDS = 1000;

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
    return beats.waiting();
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
        .submit(new Beat(caller, inFlight, session, workerIds))
        .invoke(
            beat ->
                metrics.heartbeat(
                    caller.namespace(), Duration.ofNanos(System.nanoTime() - started)));
  }

  /** The messages of an in-flight set, each once, in a list the caller may change. */
  static List<QueueLocks.Reported> reported(UUID instanceId, Optional<List<InFlight>> inFlight) {
    List<InFlight> set = inFlight.orElse(List.of());
    List<QueueLocks.Reported> out = new ArrayList<>(set.size());
    // A loop rather than a stream: this runs for every heartbeat of a flush. A client's set is
    // short, and a message seen already is found by scanning what is kept; a long set (up to
    // Ownership.MAX_IN_FLIGHT) uses a hash set so that it costs linear time, not quadratic.
    Set<String> seen = set.size() > 16 ? new HashSet<>() : null;
    for (InFlight e : set) {
      String m = e.messageId();
      if (m != null && (seen != null ? seen.add(m) : !containsMessage(out, m))) {
        out.add(new QueueLocks.Reported(instanceId, m));
      }
    }
    return out;
  }

  private static boolean containsMessage(List<QueueLocks.Reported> kept, String messageId) {
    for (QueueLocks.Reported r : kept) {
      if (r.messageId().equals(messageId)) {
        return true;
      }
    }
    return false;
  }

  /**
   * Learns the queue workers of the instances of a flush, renewed ones only, from the message ids
   * they reported: one statement per namespace with a queue, after the transaction that stored the
   * sets, so no instance row is locked meanwhile. A message is looked up at every beat until its
   * job is found locked (a job may be locked after its message was first reported), then no more
   * for that instance ({@link FoundMessages}): its worker is known, and a later lock of the job by
   * another worker is another instance's to report.
   */
  private Uni<Void> learnWorkers(List<Beat> flushed, List<Coalescer.Outcome<Heartbeat>> outcomes) {
    Map<String, List<QueueLocks.Reported>> byNamespace = new LinkedHashMap<>();
    for (int k = 0; k < flushed.size(); k++) {
      Beat b = flushed.get(k);
      if (outcomes.get(k).failure() == null && b.inFlight().isPresent()) {
        List<QueueLocks.Reported> unknown = reported(b.caller().instanceId(), b.inFlight());
        unknown.removeIf(found::contains);
        if (!unknown.isEmpty()) {
          byNamespace
              .computeIfAbsent(b.caller().namespace(), ns -> new ArrayList<>())
              .addAll(unknown);
        }
      }
    }
    List<Uni<Void>> learning = new ArrayList<>();
    byNamespace.forEach((ns, reported) -> learning.add(learnWorkers(ns, reported)));
    return learning.isEmpty()
        ? Uni.createFrom().voidItem()
        : Uni.join().all(learning).andFailFast().replaceWithVoid();
  }

  /**
   * One learning statement for namespace {@code namespace}. A failure (no queue schema yet, say) is
   * logged and costs only this learning: the next beats learn again, and a takeover learns from the
   * stored messages.
   */
  private Uni<Void> learnWorkers(String namespace, List<QueueLocks.Reported> reported) {
    if (reported.isEmpty() || !sources.has(namespace)) {
      return Uni.createFrom().voidItem();
    }
    return sources
        .get(namespace)
        .queue()
        .map(
            queue ->
                queue
                    .learnWorkers(pool, reported)
                    .invoke(
                        learned -> {
                          found.addAll(learned.found());
                          if (learned.workers() > 0) {
                            LOG.debugf(
                                "namespace %s: %d queue workers learned from %d reported messages",
                                namespace, learned.workers(), reported.size());
                          }
                        })
                    .onFailure()
                    .invoke(
                        e ->
                            LOG.warnf(
                                "could not learn the queue workers of %d reported messages in"
                                    + " namespace %s: %s",
                                reported.size(), namespace, e.toString()))
                    .onFailure()
                    .recoverWithNull()
                    .replaceWithVoid())
        .orElse(Uni.createFrom().voidItem());
  }

  /**
   * One flush of heartbeats: a transaction that renews every live instance among them in one
   * statement, then records the session reports and in-flight sets of those it renewed. A beat of
   * an instance that is not live any more fails alone ({@link InstanceGone}). A deadlock (two
   * service replicas renewing the same instances in another order, which only a client retrying on
   * another replica causes) is retried.
   */
  private Uni<List<Coalescer.Outcome<Heartbeat>>> flush(List<Beat> flushed) {
    metrics.heartbeatFlush(flushed.size());
    return pool.withTransaction(conn -> renew(conn, flushed))
        .onFailure(InstanceService::deadlocked)
        .retry()
        .atMost(2)
        .call(outcomes -> learnWorkers(flushed, outcomes));
  }

  private static boolean deadlocked(Throwable failure) {
    return failure instanceof io.vertx.pgclient.PgException pg && "40P01".equals(pg.getSqlState());
  }

  private Uni<List<Coalescer.Outcome<Heartbeat>>> renew(SqlClient conn, List<Beat> flushed) {
    UUID[] ids = flushed.stream().map(b -> b.caller().instanceId()).toArray(UUID[]::new);
    List<UUID> owners = new java.util.ArrayList<>();
    List<String> workers = new java.util.ArrayList<>();
    java.util.Set<UUID> naming = new java.util.HashSet<>();
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
              java.util.Map<UUID, Heartbeat> renewed = new java.util.HashMap<>();
              java.util.Map<UUID, SessionLiveness.Recorded> recorded = new java.util.HashMap<>();
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
              return notLive(conn, missed)
                  .chain(failures -> recordRenewed(conn, flushed, renewed, recorded, failures));
            });
  }

  private Uni<List<Coalescer.Outcome<Heartbeat>>> recordRenewed(
      SqlClient conn,
      List<Beat> flushed,
      java.util.Map<UUID, Heartbeat> renewed,
      java.util.Map<UUID, SessionLiveness.Recorded> recorded,
      java.util.Map<UUID, DomainException> failures) {
    List<Coalescer.Outcome<Heartbeat>> outcomes = new java.util.ArrayList<>();
    // Session reports that change what their rows record, all recorded in one statement; the
    // others are not recorded (nor looked into). Of an instance's beats in one flush (a client
    // that sent them at once), the last one's report counts, with a reconnect any of them reported.
    java.util.Map<UUID, SessionLiveness.SessionReport> reports = new java.util.LinkedHashMap<>();
    List<Beat> reporting = new java.util.ArrayList<>();
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
   * Why instances that were not renewed failed: {@link InstanceGone} for those that left or died,
   * and an unknown token ({@link Unauthorized}) for those retention has deleted, which is what an
   * uncached token lookup answers.
   */
  private static Uni<java.util.Map<UUID, DomainException>> notLive(
      SqlClient conn, List<UUID> instanceIds) {
    if (instanceIds.isEmpty()) {
      return Uni.createFrom().item(java.util.Map.of());
    }
    return conn.preparedQuery("SELECT id FROM rollcall.instances WHERE id = ANY($1::uuid[])")
        .execute(Tuple.of(instanceIds.toArray(UUID[]::new)))
        .map(
            rows -> {
              java.util.Set<UUID> present = new java.util.HashSet<>();
              rows.forEach(row -> present.add(row.getUUID("id")));
              java.util.Map<UUID, DomainException> failures = new java.util.HashMap<>();
              for (UUID id : instanceIds) {
                failures.put(
                    id,
                    present.contains(id) ? new InstanceGone(id) : new Unauthorized(UNKNOWN_TOKEN));
              }
              return failures;
            });
  }

  /** {@link #notLive} of one instance, as a failure. */
  public static <T> Uni<T> notLive(SqlClient conn, UUID instanceId) {
    return notLive(conn, List.of(instanceId))
        .chain(failures -> Uni.createFrom().failure(failures.get(instanceId)));
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
    return lockForEnd(conn, caller.instanceId())
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
                          throw new Unauthorized(UNKNOWN_TOKEN);
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
    return lockForEnd(conn, instanceId)
        .chain(
            () ->
                conn.preparedQuery(
                        "UPDATE rollcall.instances SET state = 'dead', ended_at = now(),"
                            + " end_reason = 'lease-expired'"
                            + " WHERE id = $1 AND rollcall.is_expired(state, lease_expires_at)"
                            + " RETURNING id, namespace, worker_ids, lease_expires_at")
                    .execute(Tuple.of(instanceId)))
        .map(InstanceService::dead);
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

  public static Uni<Void> lockForEnd(SqlClient conn, UUID instanceId) {
    return conn.preparedQuery(END_LOCK).execute(Tuple.of(instanceId)).replaceWithVoid();
  }

  /**
   * Fails with {@link InstanceGone} unless the instance is live now, and as an unknown token
   * ({@link Unauthorized}) when retention has deleted it: the answer an uncached token lookup
   * gives, so that a replica that has the token in its cache answers the same. The row is
   * key-share-locked for the rest of the transaction, so the instance cannot be declared dead
   * half-way through a claim or a completion, while its heartbeats go through.
   */
  public static Uni<Void> requireLive(SqlClient client, UUID instanceId) {
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
}
