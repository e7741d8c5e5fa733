package dev.rollcall.testing;

import io.quarkus.test.common.QuarkusTestResourceLifecycleManager;
import java.util.HashMap;
import java.util.Map;
import org.jboss.logging.Logger;

/**
 * One database and one Quarkus boot for every {@code @QuarkusTest}: the database, the test runs
 * tables and the namespaces over them.
 */
public class RollcallTestResource implements QuarkusTestResourceLifecycleManager {

  private static final Logger LOG = Logger.getLogger(RollcallTestResource.class);

  /** The admin token of the service under test. */
  public static final String ADMIN_TOKEN = "admin-token-for-tests";

  private static volatile TestDatabase database;
  private static volatile TestDatabase second;

  /**
   * The second database the running service serves ({@link SourceTables#SECOND}): a database of its
   * own on the same server.
   */
  public static TestDatabase second() {
    return second;
  }

  /** The database the running service uses. */
  public static TestDatabase database() {
    return database;
  }

  @Override
  public Map<String, String> start() {
    TestDatabase db = TestDatabase.start();
    LOG.infof("tests use %s at %s", db.origin(), db.jdbcUrl());
    SourceTables.create(db);
    EngineFixture.setUpSchemas(db);
    database = db;
    Db.bind(db);
    db.execute("DROP DATABASE IF EXISTS rollcall_second", "CREATE DATABASE rollcall_second");
    second =
        TestDatabase.of(
            db.jdbcUrl().replaceFirst("/[^/?]*(\\?|$)", "/rollcall_second$1"),
            db.user(),
            db.password(),
            db.origin() + ", database rollcall_second");
    SourceTables.createSecond(second);
    Map<String, String> config = new HashMap<>(db.quarkusSettings());
    config.putAll(SourceTables.namespaceSettings(second));
    // Tests drive the reaper one pass at a time (Reaper.runOnce).
    config.put("rollcall.reaper-interval", "off");
    config.put("rollcall.liveness.check-interval", "off");
    config.put("rollcall.sweep.interval", "off");
    // Tests drive retention one pass at a time (Retention.runOnce).
    config.put("rollcall.retention.interval", "off");
    config.put("rollcall.admin.token", ADMIN_TOKEN);
    // Low enough that a test can see the rate bound act.
    config.put("rollcall.sweep.max-runs-per-second", "50");
    return config;
  }

  @Override
  public void stop() {
    if (database != null) {
      database.close();
    }
  }
}
