package dev.rollcall.database;

import dev.rollcall.error.Problems.DatabaseUnavailable;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Pool;
import io.vertx.mutiny.sqlclient.SqlConnection;
import java.util.List;
import java.util.function.Function;

/**
 * One database Rollcall serves: its name, its pool and the namespaces whose runs and queue it
 * holds. Rollcall's own rows for those namespaces live in its {@code rollcall} schema, so every
 * statement that touches a run's queue and Rollcall's rows runs in one transaction on this pool,
 * and every lease, lock and deadline of its namespaces is decided by this database's clock.
 */
public final class Database {

  private final String name;
  private final Pool pool;
  private final List<String> namespaces;
  private volatile String unmigrated;

  Database(String name, Pool pool, List<String> namespaces, String unmigrated) {
    this.name = name;
    this.pool = pool;
    this.namespaces = List.copyOf(namespaces);
    this.unmigrated = unmigrated;
  }

  /** Its name: {@code default} for the default datasource, else its key under {@code databases}. */
  public String name() {
    return name;
  }

  /**
   * Its pool, once Rollcall's schema is migrated in it; until then a {@link DatabaseUnavailable}
   * refusal (a 503 the client retries).
   */
  public Pool pool() {
    String why = unmigrated;
    if (why != null) {
      throw new DatabaseUnavailable(name, why);
    }
    return pool;
  }

  /**
   * {@code work} in a transaction on this database's pool. A database whose schema is not migrated
   * yet fails the returned {@code Uni} with {@link DatabaseUnavailable}, as a failure to connect
   * would.
   */
  public <T> Uni<T> withTransaction(Function<SqlConnection, Uni<T>> work) {
    return Uni.createFrom().deferred(() -> pool().withTransaction(work));
  }

  /** The pool whether migrated or not: readiness asks it whether the database answers. */
  Pool anyPool() {
    return pool;
  }

  /** The namespaces it serves, in name order. */
  public List<String> namespaces() {
    return namespaces;
  }

  /** The namespaces it serves, as a statement's {@code text[]} parameter. */
  public String[] namespaceArray() {
    return namespaces.toArray(String[]::new);
  }

  /** True once Rollcall's schema is migrated in it (the default datasource's always is). */
  public boolean migrated() {
    return unmigrated == null;
  }

  /** Why it is not migrated yet; null once it is. */
  public String notMigratedBecause() {
    return unmigrated;
  }

  void migratedNow() {
    unmigrated = null;
  }

  void stillUnmigrated(String why) {
    unmigrated = why;
  }

  @Override
  public String toString() {
    return "database " + name;
  }
}
