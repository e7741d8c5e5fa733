package dev.rollcall;

import dev.rollcall.demo.EmbeddedDatabase;
import io.quarkus.runtime.Quarkus;
import io.quarkus.runtime.QuarkusApplication;
import io.quarkus.runtime.annotations.QuarkusMain;

/**
 * Starts the service. With no database configured it first starts an embedded PostgreSQL with a
 * seeded {@code demo} namespace, so that a newcomer can try the protocol with nothing installed.
 */
@QuarkusMain
public class Main {

  /** Entry point. */
  public static void main(String... args) {
    EmbeddedDatabase embedded = EmbeddedDatabase.startIfNoDatabaseConfigured();
    Quarkus.run(
        Service.class,
        (code, failure) -> {
          if (embedded != null) {
            embedded.close();
          }
          System.exit(code);
        },
        args);
  }

  /** Runs until asked to stop. */
  public static class Service implements QuarkusApplication {
    @Override
    public int run(String... args) {
      Quarkus.waitForExit();
      return 0;
    }
  }
}
