package dev.rollcall.sql;

import java.util.regex.Pattern;

/**
 * Quoting for the identifiers and literals that configuration puts into SQL against an engine's
 * tables: its runs ({@code source}) and its queue ({@code queue}) both use it, so it belongs to
 * neither.
 */
public final class Sql {

  private static final Pattern SAFE_IDENTIFIER = Pattern.compile("[A-Za-z_][A-Za-z0-9_$]{0,62}");

  private Sql() {}

  /**
   * A quoted identifier. Configured names are restricted to plain identifiers so that a typo fails
   * at startup with a clear message instead of producing odd SQL.
   */
  public static String ident(String name) {
    if (name == null || !SAFE_IDENTIFIER.matcher(name).matches()) {
      throw new IllegalArgumentException(
          "not a plain SQL identifier: '" + name + "' (letters, digits, _ and $; at most 63)");
    }
    return '"' + name + '"';
  }

  /** A string literal, safe with standard_conforming_strings (on since PostgreSQL 9.1). */
  public static String literal(String value) {
    if (value.indexOf('\0') >= 0) {
      throw new IllegalArgumentException("NUL in a SQL literal");
    }
    return "'" + value.replace("'", "''") + "'";
  }
}
