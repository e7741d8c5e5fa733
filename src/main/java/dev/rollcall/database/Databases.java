package dev.rollcall.database;

import dev.rollcall.config.RollcallConfig;
import dev.rollcall.error.Problems.UnknownNamespace;
import io.quarkus.runtime.Startup;
import io.quarkus.scheduler.Scheduled;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.core.Vertx;
import io.vertx.mutiny.pgclient.PgBuilder;
import io.vertx.mutiny.sqlclient.Pool;
import io.vertx.pgclient.PgConnectOptions;
import io.vertx.sqlclient.PoolOptions;
import jakarta.annotation.PreDestroy;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.inject.Inject;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.function.Function;
import java.util.regex.Pattern;
import org.flywaydb.core.Flyway;
import org.jboss.logging.Logger;

/**
 * The databases this service serves and which namespace lives in which: the one home of that rule.
 * The default datasource ({@code quarkus.datasource.*}, migrated by Quarkus at start) is {@value
 * #DEFAULT}; each database under {@code rollcall.databases} gets a pool Rollcall opens itself, and
 * Rollcall's schema is migrated in it at startup with the same migrations. A database that cannot
 * be reached then does not stop the service: its namespaces answer {@code database-unavailable}
 * while the migration is tried again every few seconds, and the other databases serve meanwhile.
 *
 * <p>Pools are opened at runtime rather than declared as Quarkus named datasources, whose names are
 * fixed when the service is built: a platform team adds a database to a running deployment with
 * configuration alone, as it adds a namespace.
 */
@Startup
@ApplicationScoped
public class Databases {

  private static final Logger LOG = Logger.getLogger(Databases.class);

  /** The default datasource's name. */
  public static final String DEFAULT = "default";

  /** Database names: short, lower-case, usable in metrics labels and instance tokens. */
  static final Pattern NAME = Pattern.compile("[a-z][a-z0-9_-]{0,39}");

  /** How long a migration's JDBC connection may take to open before the database counts as down. */
  static final int CONNECT_TIMEOUT_S = 5;

  private final Map<String, Database> byName;
  private final Map<String, Database> byNamespace;
  private final Map<String, Flyway> migrations = new TreeMap<>();
  private final List<Pool> opened = new ArrayList<>();

  @Inject
  Databases(Pool pool, Vertx vertx, RollcallConfig config, Flyway flyway) {
    Map<String, Optional<String>> wanted = new TreeMap<>();
    config.namespaces().forEach((ns, settings) -> wanted.put(ns, settings.database()));
    Map<String, List<String>> plan = plan(wanted, config.databases().keySet());
    Map<String, Database> named = new LinkedHashMap<>();
    Map<String, Database> of = new TreeMap<>();
    for (Map.Entry<String, List<String>> e : plan.entrySet()) {
      String name = e.getKey();
      Database db;
      if (DEFAULT.equals(name)) {
        db = new Database(DEFAULT, pool, e.getValue(), null);
      } else {
        RollcallConfig.DatabaseConfig settings = config.databases().get(name);
        Connection c = Connection.of(name, settings);
        Pool own =
            PgBuilder.pool()
                .with(new PoolOptions().setMaxSize(settings.maxSize()).setName("rollcall-" + name))
                .connectingTo(c.reactive())
                .using(vertx)
                .build();
        opened.add(own);
        db = new Database(name, own, e.getValue(), "its schema is not migrated yet");
        migrations.put(
            name,
            Flyway.configure(flyway.getConfiguration().getClassLoader())
                .configuration(flyway.getConfiguration())
                .dataSource(c.jdbcUrl(), c.reactive().getUser(), c.reactive().getPassword())
                .load());
      }
      named.put(name, db);
      e.getValue().forEach(ns -> of.put(ns, db));
    }
    this.byName = Collections.unmodifiableMap(named);
    this.byNamespace = Collections.unmodifiableMap(of);
    migrateMissing();
  }

  private Databases(Database only) {
    this.byName = Map.of(only.name(), only);
    Map<String, Database> of = new TreeMap<>();
    only.namespaces().forEach(ns -> of.put(ns, only));
    this.byNamespace = Collections.unmodifiableMap(of);
  }

  /**
   * One database, the default, serving {@code namespaces} on {@code pool}, its schema already
   * migrated: for a tool or a test that holds one pool of its own.
   */
  public static Databases single(Pool pool, Collection<String> namespaces) {
    return new Databases(new Database(DEFAULT, pool, List.copyOf(namespaces), null));
  }

  /**
   * Which database serves each namespace: {@code wanted} maps each namespace to the database it
   * names (empty: the default one); {@code declared} are the names under {@code
   * rollcall.databases}. Returns every database, the default first and then the declared ones by
   * name (also those no namespace names yet), each with its namespaces by name. A wrong name stops
   * the service at startup with a message naming the key to fix.
   */
  static Map<String, List<String>> plan(
      Map<String, Optional<String>> wanted, Set<String> declared) {
    Map<String, List<String>> plan = new LinkedHashMap<>();
    plan.put(DEFAULT, new ArrayList<>());
    for (String name : new TreeSet<>(declared)) {
      if (DEFAULT.equals(name)) {
        throw new IllegalArgumentException(
            "rollcall.databases.default: 'default' is the default datasource"
                + " (quarkus.datasource.*); give this database another name");
      }
      if (!NAME.matcher(name).matches()) {
        throw new IllegalArgumentException(
            "rollcall.databases."
                + name
                + ": a database name is lower-case letters, digits, '-' and '_', at most 40,"
                + " starting with a letter");
      }
      plan.put(name, new ArrayList<>());
    }
    for (Map.Entry<String, Optional<String>> e : new TreeMap<>(wanted).entrySet()) {
      String name = e.getValue().orElse(DEFAULT);
      List<String> namespaces = plan.get(name);
      if (namespaces == null) {
        throw new IllegalArgumentException(
            "rollcall.namespaces."
                + e.getKey()
                + ".database: no database '"
                + name
                + "' is configured (rollcall.databases."
                + name
                + ".url); configured: "
                + String.join(", ", plan.keySet()));
      }
      namespaces.add(e.getKey());
    }
    return plan;
  }

  /** The database of a configured namespace, or an {@link UnknownNamespace} refusal. */
  public Database of(String namespace) {
    Database db = namespace == null ? null : byNamespace.get(namespace);
    if (db == null) {
      throw new UnknownNamespace(String.valueOf(namespace));
    }
    return db;
  }

  /** The database of this name, if configured. */
  public Optional<Database> named(String name) {
    return Optional.ofNullable(name == null ? null : byName.get(name));
  }

  /** The default datasource's database. */
  public Database primary() {
    return byName.get(DEFAULT);
  }

  /** Every database, the default first. */
  public Collection<Database> all() {
    return byName.values();
  }

  /**
   * The databases whose schema is migrated, the default first: the background jobs run on each of
   * these (one not migrated yet has nothing of Rollcall's to work on).
   */
  public List<Database> serving() {
    return byName.values().stream().filter(Database::migrated).toList();
  }

  /**
   * {@code job} in each database whose schema is migrated, one after another (the default first);
   * their answers, in that order. A job that fails fails the whole.
   */
  public <T> Uni<List<T>> inTurn(Function<Database, Uni<T>> job) {
    return Multi.createFrom()
        .iterable(serving())
        .onItem()
        .transformToUniAndConcatenate(db -> job.apply(db))
        .collect()
        .asList();
  }

  /** The lists of each database's answer, as one list ({@link #inTurn}). */
  public static <T> List<T> flat(List<List<T>> each) {
    return each.stream().flatMap(List::stream).toList();
  }

  /** The counts of each database's answer, added up ({@link #inTurn}). */
  public static int sum(List<Integer> each) {
    return each.stream().mapToInt(Integer::intValue).sum();
  }

  /** The pool of a database whether its schema is migrated or not (readiness asks it). */
  public static Pool probePool(Database db) {
    return db.anyPool();
  }

  /**
   * Migrates Rollcall's schema in every database where that has not succeeded yet: at startup, then
   * every few seconds until each one has. Blocking (Flyway is JDBC): the scheduler runs it on a
   * worker thread.
   */
  @Scheduled(
      identity = "rollcall-migrations",
      every = "5s",
      delayed = "5s",
      concurrentExecution = Scheduled.ConcurrentExecution.SKIP)
  synchronized void migrateMissing() {
    for (Database db : byName.values()) {
      if (db.migrated()) {
        continue;
      }
      try {
        var result = migrations.get(db.name()).migrate();
        db.migratedNow();
        LOG.infof(
            "Rollcall's schema migrated in database %s (%d migrations applied, now at %s);"
                + " it serves namespaces %s",
            db.name(), result.migrationsExecuted, result.targetSchemaVersion, db.namespaces());
      } catch (RuntimeException e) {
        String why = "its schema could not be migrated: " + rootMessage(e);
        db.stillUnmigrated(why);
        LOG.warnf(
            "database %s: %s; its namespaces %s answer database-unavailable, trying again in 5 s",
            db.name(), why, db.namespaces());
      }
    }
  }

  private static String rootMessage(Throwable e) {
    Throwable t = e;
    while (t.getCause() != null && t.getCause() != t) {
      t = t.getCause();
    }
    return String.valueOf(t.getMessage());
  }

  @PreDestroy
  void close() {
    opened.forEach(Pool::closeAndForget);
  }

  /**
   * How a database under {@code rollcall.databases} is reached: its reactive options and the JDBC
   * URL Flyway migrates it through, both from its one configured URL.
   */
  record Connection(PgConnectOptions reactive, String jdbcUrl) {

    static Connection of(String name, RollcallConfig.DatabaseConfig settings) {
      String url = settings.url().trim();
      if (url.startsWith("vertx-reactive:")) {
        url = url.substring("vertx-reactive:".length());
      }
      if (!url.startsWith("postgresql://") && !url.startsWith("postgres://")) {
        throw new IllegalArgumentException(
            "rollcall.databases."
                + name
                + ".url: a PostgreSQL URL, postgresql://host:5432/database, not '"
                + redacted(url)
                + "'");
      }
      PgConnectOptions options = PgConnectOptions.fromUri(url);
      settings.username().ifPresent(options::setUser);
      settings.password().ifPresent(options::setPassword);
      // As the default datasource's pool: prepared statements cached per connection.
      options.setCachePreparedStatements(true);
      return new Connection(options, jdbcUrl(url));
    }

    /**
     * The JDBC form of a reactive URL: the same host, port, database and query options, without the
     * user and password (given to the driver apart), with a connect timeout unless one is set.
     */
    static String jdbcUrl(String url) {
      String rest = url.substring(url.indexOf("://") + 3);
      int slash = rest.indexOf('/');
      String authority = slash < 0 ? rest : rest.substring(0, slash);
      String path = slash < 0 ? "" : rest.substring(slash);
      int at = authority.lastIndexOf('@');
      String hosts = at < 0 ? authority : authority.substring(at + 1);
      String jdbc = "jdbc:postgresql://" + hosts + path;
      if (!jdbc.contains("connectTimeout=")) {
        jdbc += (jdbc.contains("?") ? "&" : "?") + "connectTimeout=" + CONNECT_TIMEOUT_S;
      }
      return jdbc;
    }

    /** A URL fit for an error message: its password hidden. */
    static String redacted(String url) {
      return url.replaceAll("(://[^:/@]*:)[^@/]*@", "$1***@");
    }
  }
}
