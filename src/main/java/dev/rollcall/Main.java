package dev.rollcall;

import dev.rollcall.demo.EmbeddedDatabase;
import dev.rollcall.demo.Startup;
import dev.rollcall.metrics.SqlClientGauges;
import io.quarkus.runtime.Quarkus;
import io.quarkus.runtime.QuarkusApplication;
import io.quarkus.runtime.annotations.QuarkusMain;
import java.util.HashMap;
import java.util.Map;
import org.eclipse.microprofile.config.ConfigProvider;
import org.jboss.logging.Logger;

/**
 * Starts the service on its configured database. Only when asked for ({@code -Drollcall.demo=true}
 * or the {@code demo} profile) and with no database configured does it first start an embedded
 * PostgreSQL with a seeded {@code demo} namespace; with neither it refuses to start, so a
 * production deploy that lost its database settings never comes up "ready" on an empty database.
 */
@QuarkusMain
public class Main {

  /** The embedded demo database this process started, if any. */
  private static volatile EmbeddedDatabase embedded;

  /** Entry point. */
  public static void main(String... args) {
    Map<String, String> properties = new HashMap<>();
    System.getProperties().forEach((k, v) -> properties.put(String.valueOf(k), String.valueOf(v)));
    embedded =
        switch (Startup.decide(properties, System.getenv())) {
          case CONFIGURED -> null;
          case EMBEDDED_DEMO -> EmbeddedDatabase.start();
          case NONE -> {
            System.err.println(Startup.NO_DATABASE);
            System.exit(1);
            yield null;
          }
        };
    SqlClientGauges.onGlobalRegistry();
    Quarkus.run(
        Service.class,
        (code, failure) -> {
          if (failure != null) {
            Logger.getLogger(Main.class).error("Rollcall stopped on a failure", failure);
          }
          if (embedded != null) {
            embedded.close();
          }
          System.exit(code);
        },
        args);
  }

  /** Runs until asked to stop; the demo first says, under Quarkus' "Listening", what to do. */
  public static class Service implements QuarkusApplication {
    @Override
    public int run(String... args) {
      EmbeddedDatabase demo = embedded;
      if (demo != null) {
        int port =
            ConfigProvider.getConfig()
                .getOptionalValue("quarkus.http.port", Integer.class)
                .orElse(8080);
        Logger.getLogger(Main.class).info(demo.banner(port));
      }
      Quarkus.waitForExit();
      return 0;
    }
  }
}
