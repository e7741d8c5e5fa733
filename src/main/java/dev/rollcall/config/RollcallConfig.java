package dev.rollcall.config;

import io.smallrye.config.ConfigMapping;
import io.smallrye.config.WithDefault;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Every setting of the service, under the prefix {@code rollcall}. The configuration table of
 * docs/operations.md lists the same keys and defaults; {@code ConfigDocumentationTest} keeps the
 * two in step.
 */
@ConfigMapping(prefix = "rollcall")
public interface RollcallConfig {

  /**
   * Starts an embedded PostgreSQL with a seeded {@code demo} namespace when no database is
   * configured (read at launch, before anything else; the {@code demo} profile sets it too).
   * Without it, and with no database configured, the service refuses to start.
   */
  @WithDefault("false")
  boolean demo();

  /** How often an instance is asked to heartbeat. */
  @WithDefault("3s")
  Duration heartbeatInterval();

  /**
   * How many heartbeat transactions one service replica runs at once. Heartbeats that arrive while
   * that many run wait, and go together in the next one: under load the transactions grow instead
   * of multiplying. {@code 1} coalesces the most; a value as large as the connection pool makes
   * every heartbeat a transaction of its own.
   */
  @WithDefault("4")
  int heartbeatFlushes();

  /** How long an instance stays live after its last heartbeat (or registration). */
  @WithDefault("10s")
  Duration leaseTtl();

  /**
   * How often the reaper looks for instances whose lease expired and opens their takeover: a
   * duration, or {@code off} (then only graceful leaves and evictions open takeovers).
   */
  @WithDefault(Intervals.REAPER_DEFAULT)
  String reaperInterval();

  /**
   * The reaper's interval; its default when it is {@code off} here (another service replica may
   * still reap at the default pace).
   */
  default Duration reaperIntervalOrDefault() {
    return Intervals.orDefault(reaperInterval(), Intervals.REAPER_DEFAULT);
  }

  /**
   * How often queue locks that no live instance owns up to are looked for and released: a duration
   * (rounded to whole reaper intervals), or {@code off} (then such locks wait for the queue's own
   * expiry). Default: half the activity fence, since a lock is an orphan only once older than it.
   */
  Optional<String> orphanedLocksInterval();

  /**
   * Runs with engine activity more recent than this are not re-driven yet (reason {@code
   * recently-active}): a peer may have just started them and not yet reported them. Default: two
   * heartbeat intervals.
   */
  Optional<Duration> activityFence();

  /** The activity fence in force: the configured one, else two heartbeat intervals. */
  default Duration effectiveActivityFence() {
    return activityFence().orElse(heartbeatInterval().multipliedBy(2));
  }

  /**
   * A boot epoch whose deployment has had no live instance for this long is closed as {@code
   * stranded} (checked every reaper interval and before every sweep): a rollout aborted
   * mid-recovery never holds its pass open, nor blocks sweeps, for longer.
   */
  @WithDefault("5m")
  Duration strandedEpochGrace();

  /**
   * An exiting leave (the process stops executing only when it exits, after the leave answers)
   * shortens the instance's lease to this instead of opening its takeover at once, so its queue
   * locks are released only once the process is gone.
   */
  @WithDefault("1s")
  Duration departureGrace();

  /** Retention: what is deleted once it is old enough, so that storage stays bounded. */
  Retention retention();

  /** Liveness: the session-lock fast path beside the lease. */
  Liveness liveness();

  /** Batches: how recovery work is cut and leased. */
  Batch batch();

  /** Sweeps: periodic passes that catch runs stranded between deploys. */
  Sweep sweep();

  /** Claims: what a claimer is told when there is nothing for it right now. */
  Claim claim();

  /** Admin API settings. */
  Admin admin();

  /** Per-instance request rates, enforced by each service replica on its own. */
  RateLimit rateLimit();

  /** The recovery scopes this service serves, by name. */
  Map<String, NamespaceConfig> namespaces();

  /**
   * Databases besides the default datasource ({@code quarkus.datasource.*}), by name: a namespace
   * whose runs and queue live in one of them names it ({@code database}). Rollcall opens their
   * pools itself, migrates its schema in each at startup and runs every lease, lock and deadline of
   * their namespaces on their own clock. {@code default} names the default datasource.
   */
  Map<String, DatabaseConfig> databases();

  /**
   * Liveness settings. An instance whose client holds its session lock is declared dead once the
   * lock is seen missing for {@code loss-confirm}; the lease covers what a session cannot see.
   */
  interface Liveness {
    /**
     * How often the session locks of live instances are checked: a duration, or {@code off} (then
     * only leases decide, as without a session lock).
     */
    @WithDefault("250ms")
    String checkInterval();

    /** The check's interval, or empty when it is {@code off} here. */
    default Optional<Duration> checkEvery() {
      return Intervals.orOff(checkInterval());
    }

    /** How long a lock must stay missing, seen by two checks, before its instance is dead. */
    @WithDefault("1s")
    Duration lossConfirm();

    /** No session proof of death within this long after a registration or a reported reconnect. */
    @WithDefault("5s")
    Duration sessionGrace();

    /**
     * No session proof of death within this long after the database started ({@code
     * pg_postmaster_start_time()}): a restart ended every session, and clients are reconnecting.
     */
    @WithDefault("30s")
    Duration restartGrace();
  }

  /** Batch settings. */
  interface Batch {
    /**
     * Runs per batch when a claim does not say {@code maxRuns}, and the size of a takeover's
     * batches.
     */
    @WithDefault("2000")
    int defaultSize();

    /** The largest {@code maxRuns} a claim may ask for. */
    @WithDefault("5000")
    int maxSize();

    /** How long a claimer holds a batch before it may be re-leased to another claimer. */
    @WithDefault("30s")
    Duration lease();

    /**
     * How many times the runs of one batch are handed out in one epoch (lease expiries and reported
     * failures both count) before they are given up with outcome {@code abandoned}, so that a
     * poison batch cannot hold an epoch open for ever.
     */
    @WithDefault("5")
    int maxAttempts();
  }

  /** Sweep settings. */
  interface Sweep {
    /** How often each namespace gets a sweep epoch: a duration, or {@code off}. */
    @WithDefault(Intervals.SWEEP_DEFAULT)
    String interval();

    /** The most runs a sweep scans per second, so a sweep never floods the engine's queue. */
    @WithDefault("1000")
    int maxRunsPerSecond();
  }

  /** Retention settings. */
  interface Retention {
    /**
     * How often a retention pass runs (one at a time across every service replica): a duration, or
     * {@code off} to keep everything.
     */
    @WithDefault("1m")
    String interval();

    /**
     * Closed epochs (with their batches, batch runs, counts and ledger rows) closed longer ago than
     * this, and instances that ended longer ago than this, are deleted.
     */
    @WithDefault("3d")
    Duration age();

    /** Rows one delete statement removes at most, so that no statement holds locks for long. */
    @WithDefault("5000")
    int chunkSize();

    /** A pass stops starting new deletes after this long; the next pass carries on. */
    @WithDefault("10s")
    Duration maxPassTime();
  }

  /** Claim settings. */
  interface Claim {
    /** The shortest {@code retryAfterMs} of a {@code wait} answer. */
    @WithDefault("250ms")
    Duration waitMin();

    /** The longest {@code retryAfterMs} of a {@code wait} answer. */
    @WithDefault("1s")
    Duration waitMax();

    /**
     * The longest {@code waitMs} a claim may ask for: how long the service holds a claim that has
     * nothing to hand out yet, waking it when work appears.
     */
    @WithDefault("30s")
    Duration maxWait();

    /**
     * Claims and completes one service replica runs against the database at once; more wait in
     * memory, in arrival order. Keep it and {@code heartbeat-flushes} together below the reactive
     * pool's size, so heartbeats always find a connection however many claimers call.
     */
    @WithDefault("8")
    int maxConcurrent();

    /**
     * How many instances work one pass's scan at once: a claim cuts a new page of a boot or sweep
     * epoch only if its instance already holds a range or batch of that epoch, or fewer than this
     * many instances do; the others' claims wait (held, and woken when an instance's last lease in
     * the pass ends). Scanning is cheap for the service and costly for the database the engine
     * shares (each batch is classified, then enqueued into its queue); more instances at once only
     * contend there. {@code 0}: no limit. Two by default: on 2 cores shared by the database, the
     * service and sixteen replicas, two scanners (one classifying while the other enqueues)
     * recovered a 100 000-run deploy faster than four at N = 4 and N = 16 (BENCHMARKS.md §8); a
     * database with cores to spare may take more.
     */
    @WithDefault("2")
    int maxScanners();
  }

  /** Rate limits. */
  interface RateLimit {
    /** Claims one instance may make per second (bursts of twice as many); {@code 0} disables. */
    @WithDefault("200")
    int claimsPerSecond();

    /**
     * Heartbeats one instance may send per second (bursts of twice as many); {@code 0} disables.
     */
    @WithDefault("5")
    int heartbeatsPerSecond();
  }

  /** Admin settings. */
  interface Admin {
    /** Bearer token of the admin API; the admin API refuses every call while it is unset. */
    Optional<String> token();
  }

  /** One recovery scope: one application's runs and queue in one database. */
  interface NamespaceConfig {
    /** The bearer secret an instance presents to register in this namespace. */
    String registrationSecret();

    /** Where this namespace's runs are read from. */
    SourceConfig source();

    /**
     * The database of this namespace's runs and queue: a name under {@code rollcall.databases};
     * unset (or {@code default}), the default datasource.
     */
    Optional<String> database();
  }

  /** One database besides the default datasource. */
  interface DatabaseConfig {
    /**
     * Where it is, as a reactive URL: {@code postgresql://host:5432/name} (user, password and
     * options may be in the URL, as with {@code quarkus.datasource.reactive.url}).
     */
    String url();

    /** The user, unless the URL names one. */
    Optional<String> username();

    /** The password, unless the URL holds one. */
    Optional<String> password();

    /**
     * The most connections Rollcall opens to it, as {@code quarkus.datasource.reactive.max-size}.
     */
    @WithDefault("20")
    int maxSize();
  }

  /** Where a namespace's runs live. */
  interface SourceConfig {
    /** {@code table} (any runs table) or {@code world-postgres} (preset for the engine). */
    SourceKind kind();

    /** Schema of the runs table; {@code world-postgres} defaults to {@code workflow}. */
    Optional<String> schema();

    /** table: name of the runs table. */
    Optional<String> table();

    /** table: the run id column (unique, ordered; keyset pagination walks it). */
    Optional<String> idColumn();

    /** table: the status column. */
    Optional<String> statusColumn();

    /** table: the status values of runs that need recovery (comma list). */
    Optional<List<String>> activeStatuses();

    /** table: the status value of runs that have not started (reason {@code pending}). */
    Optional<String> pendingStatus();

    /** table: the workflow name column. */
    Optional<String> nameColumn();

    /** table: optional creation time column; bounds the snapshot exactly when present. */
    Optional<String> createdAtColumn();

    /** table: optional last-activity column; runs touched within the activity fence wait. */
    Optional<String> updatedAtColumn();

    /** table: queue name of a run, with {@code {name}} standing for its workflow name. */
    Optional<String> queueNameTemplate();

    /**
     * Creates, at startup and concurrently, a partial index on the runs table's id for active runs
     * only, so that a scan reads about one row per active run instead of walking terminal ones too.
     * It changes the engine's schema: opt in.
     */
    @WithDefault("false")
    boolean createActiveIndex();

    /** world-postgres: the engine's graphile-worker task identifier prefix. */
    @WithDefault("workflow_")
    String jobPrefix();

    /** world-postgres: the engine's optional topic namespace ({@code ^[a-z][a-z0-9]*$}). */
    Optional<String> topicNamespace();
  }

  /** The kinds of run source. */
  enum SourceKind {
    /** Any runs table, described column by column. */
    TABLE,
    /** The {@code @workflow/world-postgres} engine's {@code workflow_runs} table. */
    WORLD_POSTGRES
  }
}
