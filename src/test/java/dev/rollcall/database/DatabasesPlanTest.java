package dev.rollcall.database;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** Which database serves each namespace, and how a database's one URL becomes Flyway's. */
@Tag("unit")
class DatabasesPlanTest {

  @Test
  void namespacesGoToTheDatabaseTheyNameAndTheRestToTheDefault() {
    Map<String, List<String>> plan =
        Databases.plan(
            Map.of(
                "orders", Optional.empty(),
                "billing", Optional.of("billing-db"),
                "audit", Optional.of("default"),
                "mail", Optional.of("billing-db")),
            Set.of("billing-db", "spare"));
    assertEquals(List.of("default", "billing-db", "spare"), List.copyOf(plan.keySet()));
    assertEquals(List.of("audit", "orders"), plan.get("default"));
    assertEquals(List.of("billing", "mail"), plan.get("billing-db"));
    assertEquals(List.of(), plan.get("spare"));
  }

  @Test
  void aNamespaceNamingAnUnknownDatabaseStopsTheServiceNamingTheKey() {
    IllegalArgumentException e =
        assertThrows(
            IllegalArgumentException.class,
            () -> Databases.plan(Map.of("billing", Optional.of("bills")), Set.of("billing-db")));
    assertTrue(
        e.getMessage().startsWith("rollcall.namespaces.billing.database: no database"),
        e.getMessage());
    assertTrue(e.getMessage().contains("default, billing-db"), e.getMessage());
  }

  @Test
  void theDefaultNameIsTheDefaultDatasourcesAndNamesAreLowerCase() {
    assertThrows(IllegalArgumentException.class, () -> Databases.plan(Map.of(), Set.of("default")));
    IllegalArgumentException e =
        assertThrows(
            IllegalArgumentException.class, () -> Databases.plan(Map.of(), Set.of("Billing")));
    assertTrue(e.getMessage().startsWith("rollcall.databases.Billing:"), e.getMessage());
  }

  @Test
  void flywayReachesTheSameDatabaseWithoutTheCredentialsInItsUrl() {
    assertEquals(
        "jdbc:postgresql://db.internal:5433/orders?connectTimeout=5",
        Databases.Connection.jdbcUrl("postgresql://app:s3cret@db.internal:5433/orders"));
    assertEquals(
        "jdbc:postgresql://db:5432/orders?sslmode=require&connectTimeout=5",
        Databases.Connection.jdbcUrl("postgresql://db:5432/orders?sslmode=require"));
    assertEquals(
        "jdbc:postgresql://db/orders?connectTimeout=2",
        Databases.Connection.jdbcUrl("postgres://db/orders?connectTimeout=2"));
  }

  @Test
  void aWrongUrlIsRefusedWithItsPasswordHidden() {
    assertEquals(
        "mysql://app:***@db/orders", Databases.Connection.redacted("mysql://app:s3cret@db/orders"));
  }
}
