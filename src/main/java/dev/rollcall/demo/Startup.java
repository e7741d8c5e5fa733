package dev.rollcall.demo;

import java.util.List;
import java.util.Map;

/**
 * What the service starts on, decided from system properties and the environment before Quarkus
 * reads its configuration: the configured database, the embedded demo database (only when asked
 * for), or nothing, with a message saying what to set.
 */
public final class Startup {

  /** The settings that mean "a database is configured", as system properties or variables. */
  static final List<String> DATABASE_KEYS =
      List.of("quarkus.datasource.jdbc.url", "quarkus.datasource.reactive.url");

  /** The flag that asks for the embedded demo database. */
  public static final String DEMO_FLAG = "rollcall.demo";

  /** The Quarkus profile whose name also asks for it. */
  public static final String DEMO_PROFILE = "demo";

  /** What to start on. */
  public enum Database {
    /** The database the settings name. */
    CONFIGURED,
    /** The embedded demo database, asked for and with no database configured. */
    EMBEDDED_DEMO,
    /** Neither: fail before anything starts. */
    NONE
  }

  private Startup() {}

  /** The decision for these system properties and environment variables. */
  public static Database decide(Map<String, String> properties, Map<String, String> env) {
    if (databaseConfigured(properties, env)) {
      return Database.CONFIGURED;
    }
    return demoRequested(properties, env) ? Database.EMBEDDED_DEMO : Database.NONE;
  }

  /** The flag is true, or the active profile is {@code demo}. */
  static boolean demoRequested(Map<String, String> properties, Map<String, String> env) {
    String flag = value(properties, env, DEMO_FLAG);
    String profile = value(properties, env, "quarkus.profile");
    return "true".equalsIgnoreCase(flag == null ? null : flag.trim())
        || (profile != null && List.of(profile.split(",")).contains(DEMO_PROFILE));
  }

  static boolean databaseConfigured(Map<String, String> properties, Map<String, String> env) {
    return DATABASE_KEYS.stream().anyMatch(k -> value(properties, env, k) != null);
  }

  /** A setting as a system property, else as an environment variable (Quarkus' naming). */
  static String value(Map<String, String> properties, Map<String, String> env, String key) {
    String property = properties.get(key);
    if (property != null) {
      return property;
    }
    return env.get(key.toUpperCase().replace('.', '_').replace('-', '_'));
  }

  /** Why the service refuses to start with no database. */
  public static final String NO_DATABASE =
      "No database configured: set QUARKUS_DATASOURCE_JDBC_URL and"
          + " QUARKUS_DATASOURCE_REACTIVE_URL (with _USERNAME and _PASSWORD), or ask for the"
          + " embedded demo database with -D"
          + DEMO_FLAG
          + "=true (ROLLCALL_DEMO=true). Refusing to start on no database.";
}
