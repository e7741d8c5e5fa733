package dev.rollcall.sql;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** Configured names and values quoted into SQL. */
@Tag("unit")
class SqlTest {

  @Test
  void identifiersThatAreNotPlainNamesAreRefused() {
    assertThrows(IllegalArgumentException.class, () -> Sql.ident("runs; DROP TABLE x"));
    assertThrows(IllegalArgumentException.class, () -> Sql.ident("\"quoted\""));
    assertEquals("\"workflow_runs\"", Sql.ident("workflow_runs"));
    assertEquals("'it''s'", Sql.literal("it's"));
  }
}
