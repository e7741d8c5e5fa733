package dev.rollcall.registry;

import dev.rollcall.config.RollcallConfig;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Row;
import io.vertx.mutiny.sqlclient.SqlClient;
import io.vertx.mutiny.sqlclient.Tuple;
import jakarta.enterprise.context.ApplicationScoped;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The fast path of liveness: an instance holds a session advisory lock in a dedicated database
 * session, and a live instance whose lock nobody holds any more has died with its session. The rule
 * of such a death lives here, in {@link #SESSION_LOST}, and is decided by the database in the
 * statement that acts on it. It is sound only when the instance's lock was reported held and seen
 * held, outside a grace after the instance registered or reported a reconnect, outside a grace
 * after the database itself started, and when the lock was seen missing at least {@code
 * lossConfirm} ago and is still missing now. The lease keeps covering everything else.
 */
@ApplicationScoped
public class SessionLiveness {

  /**
   * The first key of every Rollcall session lock ({@code 'RCLL'}); the second is {@code
   * rollcall.session_lock_objid(instance id)}. Locks taken with two int4 keys show in {@code
   * pg_locks} with {@code objsubid = 2}, a key space apart from the single-bigint form (objsubid 1)
   * that Rollcall's own transaction locks use.
   */
  public static final int CLASS_ID = 0x52434C4C;

  /** A lock missing for longer than this many confirms is an old sighting: seen anew. */
  static final int STALE_CONFIRMS = 3;

  /** The session check's timings. */
  public record Rules(Duration sessionGrace, Duration restartGrace, Duration lossConfirm) {

    /** The rules in force. */
    public static Rules of(RollcallConfig config) {
      RollcallConfig.Liveness l = config.liveness();
      return new Rules(l.sessionGrace(), l.restartGrace(), l.lossConfirm());
    }

    Duration stale() {
      return lossConfirm.multipliedBy(STALE_CONFIRMS);
    }
  }

  /** What a client reports about its lock in a heartbeat. */
  public enum Report {
    HELD,
    UNAVAILABLE,
    LOST;

    /** The report as the client spells it. */
    public static Optional<Report> parse(String state) {
      for (Report r : values()) {
        if (r.name().equalsIgnoreCase(state)) {
          return Optional.of(r);
        }
      }
      return Optional.empty();
    }
  }

  /** A heartbeat's lock report: its state, the client's backend pid, and a reconnect since. */
  public record SessionReport(Report state, Integer pid, boolean reconnected) {}

  /** Advisory locks of Rollcall's class in the service's own database, granted to someone. */
  static final String ROLLCALL_LOCKS =
      "SELECT l.objid, l.pid FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted"
          + " AND l.objsubid = 2 AND l.classid = "
          + CLASS_ID
          + "::oid AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())";

  /**
   * The death rule for instance row {@code i}, with {@code $2} session grace, {@code $3} restart
   * grace, {@code $4} loss confirm and {@code $5} stale bound, all in ms. Every guard is here, so
   * the statement that declares the death re-checks all of them at that very moment: a client that
   * reconnected (and took its lock again) between the sighting and the death is live again.
   */
  static final String SESSION_LOST =
      "i.state = 'live' AND i.session_lock = 'held'"
          + " AND i.registered_at <= now() - $2::bigint * interval '1 millisecond'"
          + " AND i.session_since <= now() - $2::bigint * interval '1 millisecond'"
          + " AND pg_postmaster_start_time() <= now() - $3::bigint * interval '1 millisecond'"
          + " AND i.session_missing_since <= now() - $4::bigint * interval '1 millisecond'"
          + " AND i.session_missing_since > now() - $5::bigint * interval '1 millisecond'"
          + " AND i.session_missing_since > pg_postmaster_start_time()"
          + " AND NOT EXISTS (SELECT 1 FROM ("
          + ROLLCALL_LOCKS
          + ") held WHERE held.objid = rollcall.session_lock_objid(i.id)::oid)";

  /**
   * Whether some live instance's fast path is armed (its lock recorded held): what the checks
   * watch. Without the restart grace of {@link #check}, so that it is true whenever a check may
   * have something to look at.
   */
  public static final String ANY_ARMED =
      "EXISTS (SELECT 1 FROM rollcall.instances i WHERE i.session_lock = 'held'"
          + " AND rollcall.is_live(i.state, i.lease_expires_at))";

  private final RollcallConfig config;
  private final Endings endings;
  private final AtomicLong heldRecords = new AtomicLong();

  SessionLiveness(RollcallConfig config, Endings endings) {
    this.config = config;
    this.endings = endings;
  }

  /**
   * What an instance row records of its session lock, as the heartbeat's renewal returned it: the
   * renewal row-locked it, so it stays so until the heartbeat's transaction ends.
   */
  public record Recorded(String lock, Integer pid, boolean sighted) {}

  /**
   * Whether a heartbeat's report must be recorded: false when recording it would write what the row
   * already says. Recording a report of {@code held} reads {@code pg_locks}, which copies the whole
   * lock table (every session lock of the fleet), and every record is a write of the row; nearly
   * every beat of a fleet reports the lock its row already records held, so nearly every beat skips
   * both, and a beat costs the same whatever the fleet's size. A report is recorded when it names
   * another state or backend, reports a reconnect (the grace starts again), reports {@code held}
   * over a lock the service has not seen held ({@code unseen}: it looks again), or when a check has
   * recorded a sighting of the lock missing (the beat then looks, as it always did: a lock gone
   * from a session that lives is {@code unseen}, and the instance keeps its lease). The checks keep
   * watching every armed lock.
   */
  public static boolean changes(SessionReport report, Recorded recorded) {
    return report.reconnected()
        || recorded.sighted()
        || !java.util.Objects.equals(report.pid(), recorded.pid())
        || !report.state().name().equalsIgnoreCase(recorded.lock());
  }

  /**
   * Records the lock reports of one flush of heartbeats (those that {@link #changes} what is
   * recorded), in the flush's transaction, after its renewal, which row-locks the instances: a
   * death decided concurrently waits for it and re-checks. A report of {@code held} arms the fast
   * path only when the service itself sees the lock granted to the reported backend in its own
   * database; a new backend or a reconnect restarts the grace. One statement for the flush, which
   * reads the lock table at most once, when some report is {@code held}: the first beats of a fleet
   * that starts at once cost one read of it per flush, not one per instance.
   */
  public Uni<Void> record(SqlClient conn, java.util.Map<UUID, SessionReport> reports) {
    if (reports.isEmpty()) {
      return Uni.createFrom().voidItem();
    }
    boolean held = reports.values().stream().anyMatch(r -> r.state() == Report.HELD);
    int n = reports.size();
    UUID[] ids = new UUID[n];
    String[] states = new String[n];
    Integer[] pids = new Integer[n];
    Boolean[] reconnected = new Boolean[n];
    int k = 0;
    for (var e : reports.entrySet()) {
      ids[k] = e.getKey();
      states[k] = e.getValue().state().name().toLowerCase();
      pids[k] = e.getValue().pid();
      reconnected[k++] = e.getValue().reconnected();
    }
    return conn.preparedQuery(
            "WITH r AS (SELECT * FROM unnest($1::uuid[], $2::text[], $3::int[], $4::bool[])"
                + "   AS r(id, state, pid, reconnected)),"
                // Read once, and not at all when no report is held: the uncorrelated EXISTS is a
                // one-time filter over the scan of pg_locks.
                + " locks AS MATERIALIZED (SELECT DISTINCT l.objid, l.pid FROM ("
                + ROLLCALL_LOCKS
                + ") l WHERE EXISTS (SELECT 1 FROM r WHERE r.state = 'held')),"
                + " next AS (SELECT r.id, r.pid, r.reconnected, CASE WHEN r.state <> 'held'"
                + "   THEN r.state WHEN l.objid IS NOT NULL THEN 'held' ELSE 'unseen' END AS lock"
                + "   FROM r LEFT JOIN locks l ON r.state = 'held'"
                + "   AND l.objid = rollcall.session_lock_objid(r.id)::oid AND l.pid = r.pid)"
                + " UPDATE rollcall.instances i SET session_lock = next.lock, session_pid = next.pid,"
                + " session_missing_since = NULL,"
                + " session_since = CASE WHEN next.lock = 'held' AND (i.session_lock <> 'held'"
                + "   OR next.reconnected OR i.session_pid IS DISTINCT FROM next.pid)"
                + "   THEN now() ELSE i.session_since END"
                + " FROM next WHERE i.id = next.id AND i.state = 'live'")
        .execute(Tuple.of(ids, states, pids, reconnected))
        // Counted once the statement ran: the next check of this replica looks (the flush has
        // mostly committed by then; if not, the reaper's look finds the lock armed a reaper
        // interval later, well within the session grace that keeps a new lock from any death).
        .invoke(
            () -> {
              if (held) {
                heldRecords.incrementAndGet();
              }
            })
        .replaceWithVoid();
  }

  /**
   * How many flushes of this replica have recorded a report of {@code held} so far: a check that
   * found no armed lock looks again once this grows ({@code SessionReaper}), since the lock may now
   * be armed.
   */
  public long heldRecords() {
    return heldRecords.get();
  }

  /**
   * The first sightings and the confirmed losses of one check, and whether some fast path was armed
   * ({@link #ANY_ARMED}) when it looked.
   */
  public record Check(int seenMissing, int seenAgain, List<UUID> lost, boolean armed) {}

  /**
   * Looks at the locks of every instance whose fast path is armed, in one statement: a lock seen
   * missing is marked (unless an earlier, still recent sighting stands), a lock seen again clears
   * its mark, and the instances that {@link #SESSION_LOST} condemns are returned for the reaper's
   * guarded death statement. Nothing is checked while the database itself is within its restart
   * grace: every session ended with it.
   */
  public Uni<Check> check(SqlClient client, Rules rules, int limit) {
    return client
        .preparedQuery(
            "WITH locks AS MATERIALIZED ("
                + ROLLCALL_LOCKS
                + "), armed AS (SELECT i.id, EXISTS (SELECT 1 FROM locks"
                + "   WHERE locks.objid = rollcall.session_lock_objid(i.id)::oid) AS held"
                + "   FROM rollcall.instances i WHERE i.session_lock = 'held'"
                + "   AND pg_postmaster_start_time() <= now() - $3::bigint * interval '1 millisecond'"
                + "   AND rollcall.is_live(i.state, i.lease_expires_at)),"
                + " seen AS (UPDATE rollcall.instances i SET session_missing_since = now()"
                + "   FROM armed WHERE i.id = armed.id AND NOT armed.held"
                + "   AND (i.session_missing_since IS NULL"
                + "     OR i.session_missing_since <= now() - $5::bigint * interval '1 millisecond'"
                + "     OR i.session_missing_since <= pg_postmaster_start_time())"
                + "   RETURNING i.id),"
                + " again AS (UPDATE rollcall.instances i SET session_missing_since = NULL"
                + "   FROM armed WHERE i.id = armed.id AND armed.held"
                + "   AND i.session_missing_since IS NOT NULL RETURNING i.id)"
                // The statement's snapshot shows the marks as they were before it: a loss is one
                // seen by an earlier check and still missing now.
                + " SELECT (SELECT count(*) FROM seen) AS seen_missing,"
                + " (SELECT count(*) FROM again) AS seen_again,"
                + " ARRAY(SELECT i.id FROM rollcall.instances i JOIN armed ON armed.id = i.id"
                + "   WHERE "
                + SESSION_LOST
                + " ORDER BY i.session_missing_since LIMIT $1) AS lost, "
                + ANY_ARMED
                + " AS armed")
        .execute(Tuple.tuple(params(rules, limit)))
        .map(
            rows -> {
              Row r = rows.iterator().next();
              return new Check(
                  r.getInteger("seen_missing"),
                  r.getInteger("seen_again"),
                  List.of(r.getArrayOfUUIDs("lost")),
                  r.getBoolean("armed"));
            });
  }

  /**
   * Declares an instance dead on the proof of its lost session, in the caller's transaction, if
   * {@link #SESSION_LOST} still holds now; empty when it does not (the client reconnected, a
   * heartbeat reported the loss, another service replica won). The death's moment is when the lock
   * was first seen missing.
   */
  public Uni<Optional<Endings.Dead>> markDeadIfSessionLost(
      SqlClient conn, UUID instanceId, Rules rules) {
    return endings.declareDead(
        conn,
        instanceId,
        new Endings.DeathProof(
            "session-lost", SESSION_LOST, "i.session_missing_since", ruleParams(rules)));
  }

  /** {@link #markDeadIfSessionLost(SqlClient, UUID, Rules)} with the rules in force. */
  public Uni<Optional<Endings.Dead>> markDeadIfSessionLost(SqlClient conn, UUID instanceId) {
    return markDeadIfSessionLost(conn, instanceId, Rules.of(config));
  }

  private static List<Object> params(Rules rules, Object first) {
    List<Object> all = new ArrayList<>();
    all.add(first);
    all.addAll(ruleParams(rules));
    return all;
  }

  /** The rules as $2 to $5 of {@link #SESSION_LOST}. */
  private static List<Object> ruleParams(Rules rules) {
    return List.of(
        rules.sessionGrace().toMillis(),
        rules.restartGrace().toMillis(),
        rules.lossConfirm().toMillis(),
        rules.stale().toMillis());
  }
}
