package dev.rollcall.admin;

import dev.rollcall.error.Problems.InvalidRequest;
import io.quarkus.hibernate.reactive.panache.Panache;
import io.smallrye.mutiny.Uni;
import java.nio.charset.StandardCharsets;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.hibernate.reactive.mutiny.Mutiny;

/**
 * What every list of the admin API shares: its page size, its opaque cursor, the conditions it was
 * given, and its rows read with HQL in the current session.
 */
final class Pages {

  /** The largest page a list returns. */
  static final int MAX_LIMIT = 500;

  private Pages() {}

  /** The rows of an HQL query in the current session. */
  static Uni<List<Object[]>> select(String hql, Map<String, Object> parameters) {
    return rows(false, hql, parameters);
  }

  /** The rows of a plain SQL query in the current session (a union HQL cannot say). */
  static Uni<List<Object[]>> selectSql(String sql, Map<String, Object> parameters) {
    return rows(true, sql, parameters);
  }

  private static Uni<List<Object[]>> rows(
      boolean nativeSql, String text, Map<String, Object> parameters) {
    return Panache.getSession()
        .chain(
            session -> {
              Mutiny.SelectionQuery<Object[]> query =
                  nativeSql
                      ? session.createNativeQuery(text, Object[].class)
                      : session.createSelectionQuery(text, Object[].class);
              parameters.forEach(query::setParameter);
              return query.getResultList();
            });
  }

  /** The conditions of a list that are given, joined with {@code and}. */
  static final class Where {
    private final List<String> conditions = new ArrayList<>();
    private final Map<String, Object> params = new HashMap<>();

    Where and(Object value, String condition, String name) {
      return value == null ? this : and(condition, Map.of(name, value));
    }

    Where and(String condition, Map<String, Object> values) {
      conditions.add(condition);
      params.putAll(values);
      return this;
    }

    String query(String entity) {
      return "from "
          + entity
          + (conditions.isEmpty() ? "" : " where " + String.join(" and ", conditions));
    }

    Map<String, Object> params() {
      return params;
    }
  }

  static int limit(Integer limit) {
    if (limit == null) {
      return 50;
    }
    if (limit < 1 || limit > MAX_LIMIT) {
      throw new InvalidRequest("'limit' must be between 1 and " + MAX_LIMIT);
    }
    return limit;
  }

  static String encode(String cursor) {
    return Base64.getUrlEncoder()
        .withoutPadding()
        .encodeToString(cursor.getBytes(StandardCharsets.UTF_8));
  }

  static String decode(String cursor) {
    try {
      return new String(Base64.getUrlDecoder().decode(cursor), StandardCharsets.UTF_8);
    } catch (IllegalArgumentException e) {
      throw new InvalidRequest("'cursor' is not a cursor this API returned");
    }
  }

  static Object[] instanceCursor(String value) {
    try {
      String[] parts = value.split("\\|", 2);
      return new Object[] {OffsetDateTime.parse(parts[0]), UUID.fromString(parts[1])};
    } catch (RuntimeException e) {
      throw new InvalidRequest("'cursor' is not a cursor this API returned");
    }
  }

  static long parseLong(String value) {
    try {
      return Long.parseLong(value);
    } catch (NumberFormatException e) {
      throw new InvalidRequest("'cursor' is not a cursor this API returned");
    }
  }
}
