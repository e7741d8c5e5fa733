package dev.rollcall.testing;

import java.util.HashMap;
import java.util.Map;

/**
 * The run tables the tests recover from, and the namespaces over them. Every namespace {@code ns}
 * has the registration secret {@code secret-ns} and reads {@code rollcall_it.<ns>_runs}.
 */
public final class SourceTables {

  /** The schema of every test runs table. */
  public static final String SCHEMA = "rollcall_it";

  /** 10 000 active runs (and 2 000 terminal ones). Never changed by a test. */
  public static final String LARGE = "large";

  /** Active runs of {@link #LARGE}. */
  public static final int LARGE_ACTIVE = 10_000;

  /** 30 active runs (and 10 terminal ones). Never changed by a test. */
  public static final String SMALL = "small";

  /** Active runs of {@link #SMALL}. */
  public static final int SMALL_ACTIVE = 30;

  /** Empty at start; tests add runs to it. */
  public static final String GROWING = "growing";

  /** Empty at start; the benchmark fills it. */
  public static final String BENCH = "bench";

  /** Empty at start; its namespace has an activity column ({@code updated_at}). */
  public static final String ACTIVE = "active";

  /**
   * The {@code world-postgres} namespace over the engine's own schema (see {@link EngineFixture}).
   */
  public static final String ENGINE = "engine";

  /**
   * A table namespace in a database of its own ({@link #SECOND_DATABASE}, on the same server):
   * {@link #SECOND_ACTIVE} active runs in {@code rollcall_it.second_runs} there.
   */
  public static final String SECOND = "second";

  /** The name the service knows the second database by ({@code rollcall.databases.second}). */
  public static final String SECOND_DATABASE = "second";

  /** Active runs of {@link #SECOND}. */
  public static final int SECOND_ACTIVE = 20;

  private static final String[] TABLE_NAMESPACES = {LARGE, SMALL, GROWING, BENCH, ACTIVE};

  private SourceTables() {}

  /** The registration secret of a test namespace. */
  public static String secret(String namespace) {
    return "secret-" + namespace;
  }

  /** The qualified runs table of a test namespace. */
  public static String table(String namespace) {
    return SCHEMA + "." + namespace + "_runs";
  }

  /** Creates every test runs table from scratch. */
  public static void create(TestDatabase db) {
    db.execute("DROP SCHEMA IF EXISTS " + SCHEMA + " CASCADE", "CREATE SCHEMA " + SCHEMA);
    for (String ns : TABLE_NAMESPACES) {
      db.execute(
          "CREATE TABLE "
              + table(ns)
              + " (id text PRIMARY KEY, workflow_name text NOT NULL, status text NOT NULL,"
              + " created_at timestamptz NOT NULL DEFAULT now(),"
              + " updated_at timestamptz NOT NULL DEFAULT now() - interval '1 hour', payload jsonb)");
    }
    insertRuns(db, LARGE, 1, LARGE_ACTIVE, LARGE_ACTIVE / 5);
    insertRuns(db, SMALL, 1, SMALL_ACTIVE, 10);
  }

  /**
   * Inserts runs {@code wrun_<n>} for n in [first, first + active + terminal): every third run is
   * pending, the others running; the terminal ones interleave with them.
   */
  public static void insertRuns(TestDatabase db, String ns, int first, int active, int terminal) {
    db.execute(
        "INSERT INTO "
            + table(ns)
            + " (id, workflow_name, status, payload)"
            + " SELECT 'wrun_' || lpad(n::text, 10, '0'), 'flow' || (n % 7),"
            + " CASE WHEN n % "
            + Math.max(2, (active + terminal) / Math.max(1, terminal))
            + " = 0 AND "
            + terminal
            + " > 0 THEN 'completed' ELSE (CASE WHEN n % 3 = 1 THEN 'pending' ELSE 'running' END)"
            + " END, '{\"blob\": true}'"
            + " FROM generate_series("
            + first
            + ", "
            + (first + active + terminal - 1)
            + ") AS n");
  }

  /** The rollcall.* settings of every test namespace. */
  /**
   * Creates the second database's runs table, from scratch, in {@code second} (a database of its
   * own on the same server).
   */
  public static void createSecond(TestDatabase second) {
    second.execute("DROP SCHEMA IF EXISTS " + SCHEMA + " CASCADE", "CREATE SCHEMA " + SCHEMA);
    second.execute(
        "CREATE TABLE "
            + table(SECOND)
            + " (id text PRIMARY KEY, workflow_name text NOT NULL, status text NOT NULL,"
            + " created_at timestamptz NOT NULL DEFAULT now(),"
            + " updated_at timestamptz NOT NULL DEFAULT now() - interval '1 hour', payload jsonb)");
    insertRuns(second, SECOND, 1, SECOND_ACTIVE, 5);
  }

  /**
   * The settings of every test namespace; {@link #SECOND} in the database {@code second} at {@code
   * secondDb}.
   */
  public static Map<String, String> namespaceSettings(TestDatabase secondDb) {
    Map<String, String> settings = namespaceSettings();
    tableNamespace(settings, SECOND);
    settings.put("rollcall.namespaces.\"" + SECOND + "\".database", SECOND_DATABASE);
    String d = "rollcall.databases.\"" + SECOND_DATABASE + "\".";
    settings.put(d + "url", secondDb.reactiveUrl());
    settings.put(d + "username", secondDb.user());
    settings.put(d + "password", secondDb.password());
    return settings;
  }

  private static void tableNamespace(Map<String, String> settings, String ns) {
    String p = "rollcall.namespaces.\"" + ns + "\".";
    settings.put(p + "registration-secret", secret(ns));
    settings.put(p + "source.kind", "table");
    settings.put(p + "source.schema", SCHEMA);
    settings.put(p + "source.table", ns + "_runs");
    settings.put(p + "source.id-column", "id");
    settings.put(p + "source.status-column", "status");
    settings.put(p + "source.active-statuses", "pending,running");
    settings.put(p + "source.name-column", "workflow_name");
    settings.put(p + "source.created-at-column", "created_at");
    settings.put(p + "source.queue-name-template", "__wkf_workflow_{name}");
  }

  /** The settings of every test namespace of the default database. */
  public static Map<String, String> namespaceSettings() {
    Map<String, String> settings = new HashMap<>();
    for (String ns : TABLE_NAMESPACES) {
      tableNamespace(settings, ns);
      String p = "rollcall.namespaces.\"" + ns + "\".";
      if (ns.equals(ACTIVE)) {
        settings.put(p + "source.updated-at-column", "updated_at");
      }
    }
    String engine = "rollcall.namespaces.\"" + ENGINE + "\".";
    settings.put(engine + "registration-secret", secret(ENGINE));
    settings.put(engine + "source.kind", "world-postgres");
    return settings;
  }
}
