package dev.rollcall.demo;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.rollcall.demo.Startup.Database;
import java.util.Map;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** The embedded demo database starts only when asked for; no database at all is a refusal. */
@Tag("unit")
class StartupTest {

  static final Map<String, String> NONE = Map.of();

  @Test
  void withNoDatabaseAndNoFlagTheServiceRefusesToStartInsteadOfStartingTheDemo() {
    assertEquals(Database.NONE, Startup.decide(NONE, NONE));
    assertEquals(Database.NONE, Startup.decide(Map.of("rollcall.demo", "false"), NONE));
    assertEquals(Database.NONE, Startup.decide(NONE, Map.of("QUARKUS_PROFILE", "prod")));
  }

  @Test
  void theDemoStartsWhenTheFlagOrTheDemoProfileAsksForIt() {
    assertEquals(Database.EMBEDDED_DEMO, Startup.decide(Map.of("rollcall.demo", "true"), NONE));
    assertEquals(Database.EMBEDDED_DEMO, Startup.decide(NONE, Map.of("ROLLCALL_DEMO", "TRUE")));
    assertEquals(Database.EMBEDDED_DEMO, Startup.decide(Map.of("quarkus.profile", "demo"), NONE));
    assertEquals(
        Database.EMBEDDED_DEMO, Startup.decide(NONE, Map.of("QUARKUS_PROFILE", "dev,demo")));
  }

  @Test
  void aConfiguredDatabaseWinsOverTheFlag() {
    assertEquals(
        Database.CONFIGURED,
        Startup.decide(
            Map.of("rollcall.demo", "true"),
            Map.of("QUARKUS_DATASOURCE_REACTIVE_URL", "postgresql://db/app")));
    assertEquals(
        Database.CONFIGURED,
        Startup.decide(Map.of("quarkus.datasource.jdbc.url", "jdbc:postgresql://db/app"), NONE));
  }
}
