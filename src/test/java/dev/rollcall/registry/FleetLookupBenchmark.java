package dev.rollcall.registry;

import dev.rollcall.sql.Liveness;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.ServiceTest;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * What the statements that find instance rows by id cost as the fleet grows, written as they are
 * ({@link Liveness}) and as they were ({@code rollcall.is_live(state, lease_expires_at)}), side by
 * side on one database: a heartbeat flush of four instances, a leave, and the live owners of a
 * page's 500 runs. The fleet's statistics are gathered while its leases lie in the past and the
 * leases then renewed, as a running fleet always has them. Each statement runs {@code
 * bench.executions} times per form, the forms alternating, each execution in a transaction rolled
 * back; the figures are each execution's time as the driver saw it. Run with {@code bench/run
 * fleet-lookups} ({@code -Dbench.fleets=1000,5000 -Dbench.executions=300}).
 */
@ServiceTest
@Tag("benchmark")
class FleetLookupBenchmark {

  private static final String NS = "fleet-lookups";

  /** Runs each instance reports executing (its ownership rows). */
  private static final int RUNS_EACH = 20;

  private static final String OLD_LIVE_I = "rollcall.is_live(i.state, i.lease_expires_at)";
  private static final String OLD_LIVE = "rollcall.is_live(state, lease_expires_at)";

  @Test
  void fleetLookups() throws Exception {
    int executions = Integer.getInteger("bench.executions", 300);
    System.out.printf(
        "%nStatements that find instances by id, as written now (by id) and as before (is_live);"
            + " %d executions of each, alternating, in transactions rolled back:%n%n",
        executions);
    System.out.println("| live instances | statement | by id p50 / p99 | is_live p50 / p99 |");
    System.out.println("|---|---|---|---|");
    for (String f : System.getProperty("bench.fleets", "1000,5000").split(",")) {
      int fleet = Integer.parseInt(f.trim());
      try (Connection c = Db.database().connect()) {
        seed(c, fleet);
        List<UUID> ids = ids(c);
        String[] runs = new String[500];
        for (int r = 0; r < runs.length; r++) {
          runs[r] = "fleet-run-" + ids.get((r * 7919) % fleet) + "-" + (r % RUNS_EACH);
        }
        String four =
            "'{"
                + ids.get(0)
                + ","
                + ids.get(fleet / 3)
                + ","
                + ids.get(2 * fleet / 3)
                + ","
                + ids.get(fleet - 1)
                + "}'";
        String runIds = "'{" + String.join(",", runs) + "}'";
        compare(
            c,
            fleet,
            "heartbeat flush of 4",
            Heartbeats.RENEW,
            Heartbeats.RENEW.replace(Liveness.liveById("i."), OLD_LIVE_I),
            "uuid[], bigint, uuid[], text[], int, bigint, bigint",
            four + ", 10000, '{}', '{}', 1000, 3000, 2000",
            executions);
        compare(
            c,
            fleet,
            "leave",
            Endings.MARK_LEFT,
            Endings.MARK_LEFT.replace(Liveness.liveById(""), OLD_LIVE),
            "uuid",
            "'" + ids.get(fleet / 2) + "'",
            executions);
        compare(
            c,
            fleet,
            "live owners of 500 runs",
            Ownership.LIVE_OWNERS,
            Ownership.LIVE_OWNERS.replace("i.state = 'live'", OLD_LIVE_I),
            "text, text[]",
            "'" + NS + "', " + runIds,
            executions);
        clear(c);
      }
    }
  }

  /**
   * Prepares both forms as the service's driver does (server-side prepared statements, so
   * PostgreSQL chooses between custom and generic plans as it does for the service) and executes
   * them in turn.
   */
  private static void compare(
      Connection c,
      int fleet,
      String label,
      String byId,
      String asBefore,
      String types,
      String args,
      int executions)
      throws Exception {
    if (byId.equals(asBefore)) {
      throw new IllegalStateException(label + ": no liveness test by id to compare");
    }
    long[] now = new long[executions];
    long[] before = new long[executions];
    try (Statement st = c.createStatement()) {
      st.execute("PREPARE by_id(" + types + ") AS " + byId);
      st.execute("PREPARE as_before(" + types + ") AS " + asBefore);
      c.setAutoCommit(false);
      for (int i = 0; i < executions; i++) {
        now[i] = timed(c, st, "EXECUTE by_id(" + args + ")");
        before[i] = timed(c, st, "EXECUTE as_before(" + args + ")");
      }
      c.setAutoCommit(true);
      st.execute("DEALLOCATE by_id");
      st.execute("DEALLOCATE as_before");
    }
    System.out.printf(
        "| %d | %s | %s | %s |%n", fleet, label, percentiles(now), percentiles(before));
  }

  private static long timed(Connection c, Statement st, String execute) throws Exception {
    long t0 = System.nanoTime();
    try (ResultSet rs = st.executeQuery(execute)) {
      while (rs.next()) {
        // read every row, as the service does
      }
    }
    long took = System.nanoTime() - t0;
    c.rollback();
    return took;
  }

  private static String percentiles(long[] nanos) {
    long[] sorted = nanos.clone();
    Arrays.sort(sorted);
    return String.format(
        "%.2f / %.2f ms",
        sorted[sorted.length / 2] / 1e6, sorted[(int) Math.ceil(sorted.length * 0.99) - 1] / 1e6);
  }

  /**
   * The fleet, twice as many instances that left (kept until retention deletes them), and the runs
   * each live instance reports; analyzed while the live leases lay an hour in the past, then
   * renewed.
   */
  private static void seed(Connection c, int fleet) throws Exception {
    clear(c);
    try (Statement st = c.createStatement()) {
      st.execute(
          "INSERT INTO rollcall.instances (id, namespace, deployment_id, name, token_hash,"
              + " lease_expires_at) SELECT gen_random_uuid(), '"
              + NS
              + "', 'fleet-deploy', 'fleet-' || g, decode(md5('fleet-lookups-' || g), 'hex'),"
              + " now() - interval '1 hour' + g * interval '1 millisecond'"
              + " FROM generate_series(1, "
              + fleet
              + ") g");
      st.execute(
          "INSERT INTO rollcall.instances (id, namespace, deployment_id, name, token_hash,"
              + " lease_expires_at, state, ended_at, end_reason) SELECT gen_random_uuid(), '"
              + NS
              + "', 'fleet-old-deploy', 'fleet-left-' || g,"
              + " decode(md5('fleet-lookups-left-' || g), 'hex'),"
              + " now() - interval '2 hours' + g * interval '1 millisecond', 'left',"
              + " now() - interval '2 hours', 'left' FROM generate_series(1, "
              + 2 * fleet
              + ") g");
      st.execute(
          "INSERT INTO rollcall.ownership (instance_id, run_id, namespace)"
              + " SELECT i.id, 'fleet-run-' || i.id || '-' || r, i.namespace"
              + " FROM rollcall.instances i, generate_series(0, "
              + (RUNS_EACH - 1)
              + ") r WHERE i.namespace = '"
              + NS
              + "' AND i.state = 'live'");
      st.execute("ANALYZE rollcall.instances");
      st.execute("ANALYZE rollcall.ownership");
      st.execute(
          "UPDATE rollcall.instances SET lease_expires_at = now() + interval '1 hour'"
              + " WHERE namespace = '"
              + NS
              + "' AND state = 'live'");
    }
  }

  private static List<UUID> ids(Connection c) throws Exception {
    List<UUID> ids = new ArrayList<>();
    try (Statement st = c.createStatement();
        ResultSet rs =
            st.executeQuery(
                "SELECT id FROM rollcall.instances WHERE namespace = '"
                    + NS
                    + "' AND state = 'live' ORDER BY name")) {
      while (rs.next()) {
        ids.add(rs.getObject(1, UUID.class));
      }
    }
    return ids;
  }

  private static void clear(Connection c) throws Exception {
    try (Statement st = c.createStatement()) {
      st.execute("DELETE FROM rollcall.ownership WHERE namespace = '" + NS + "'");
      st.execute("DELETE FROM rollcall.instances WHERE namespace = '" + NS + "'");
    }
  }
}
