package dev.rollcall.registry;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.testing.Plans;
import dev.rollcall.testing.ServiceTest;
import java.sql.Statement;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Statements that find instance rows by id read those rows, not the fleet. A live lease always lies
 * ahead of the statistics of the last ANALYZE; compared with {@code now()}, the planner took about
 * one instance for live and read every live lease through {@code instances_live_by_lease} to find
 * the ids it was given: a heartbeat flush, a leave and a classification's owner lookup grew with
 * the fleet ({@link Liveness}). Each plan is checked as PostgreSQL runs it, against a fleet of 2
 * 000 live instances whose statistics were gathered while their leases lay in the past, as they
 * always do in a running fleet.
 */
@ServiceTest
class LivenessPlanTest {

  private static final int FLEET = 2000;

  @Test
  void aHeartbeatFlushReadsTheInstancesItRenews() throws Exception {
    for (String plan :
        explain(
            Heartbeats.RENEW,
            "uuid[], bigint, uuid[], text[], int, bigint, bigint",
            "'{"
                + id(1)
                + ","
                + id(700)
                + ","
                + id(1400)
                + "}', 10000, '{}', '{}', 1000, 3000,"
                + " 2000")) {
      assertTrue(plan.contains("rows=3 loops=1"), plan);
      assertUsesIdsNotLeases(plan);
    }
  }

  @Test
  void aLeaveReadsItsOwnInstance() throws Exception {
    for (String plan : explain(Endings.MARK_LEFT, "uuid", "'" + id(1000) + "'")) {
      assertTrue(plan.contains("Update on instances"), plan);
      assertUsesIdsNotLeases(plan);
    }
  }

  @Test
  void theOwnersOfRunsAreReadFromTheRunsOwnershipRows() throws Exception {
    for (String plan :
        explain(
            Ownership.LIVE_OWNERS,
            "text, text[]",
            "'small', ARRAY['plan-run-1-1', 'plan-run-500-2', 'plan-run-1500-3']")) {
      assertTrue(plan.contains("ownership_by_run"), plan);
      assertFalse(plan.contains("ownership_pkey"), plan);
      assertFalse(plan.contains("instances_live_by_lease"), plan);
    }
  }

  /** The id of fleet instance {@code n} (1 to {@link #FLEET}). */
  private static String id(int n) {
    return String.format("00000000-0000-0000-0000-%012d", n);
  }

  /**
   * The instance rows the statement acts on (the scan of {@code instances}, aliased {@code i} or
   * not) are found through the primary key. Other scans of the table, such as the heartbeat's look
   * for peers whose lease is about to run out, read a range of leases by design.
   */
  private static void assertUsesIdsNotLeases(String plan) {
    List<String> scans =
        plan.lines().filter(l -> l.matches(".*Scan.* on instances( i)?  \\(.*")).toList();
    assertFalse(scans.isEmpty(), plan);
    assertTrue(scans.stream().allMatch(l -> l.contains("using instances_pkey")), plan);
  }

  /** The plan for these arguments and the generic plan (both kept by a pooled connection). */
  private static List<String> explain(String sql, String types, String args) throws Exception {
    return Plans.explainAsCached(0, LivenessPlanTest::fleet, sql, types, args);
  }

  /**
   * 2 000 live instances, each reporting three runs, analyzed while their leases lay an hour in the
   * past and then renewed: the statistics a running fleet always has.
   */
  private static void fleet(Statement st) throws Exception {
    st.execute(
        "INSERT INTO rollcall.instances (id, namespace, deployment_id, name, token_hash,"
            + " lease_expires_at) SELECT ('00000000-0000-0000-0000-' || lpad(g::text, 12, '0'))::uuid,"
            + " 'small', 'plan-deploy',"
            + " 'plan-fleet-' || g, decode(md5('plan-fleet-' || g), 'hex'),"
            + " now() - interval '1 hour' + g * interval '1 millisecond'"
            + " FROM generate_series(1, "
            + FLEET
            + ") g");
    st.execute(
        "INSERT INTO rollcall.ownership (instance_id, run_id, namespace)"
            + " SELECT i.id, 'plan-run-' || substr(i.name, 12) || '-' || r, 'small'"
            + " FROM rollcall.instances i, generate_series(1, 3) r"
            + " WHERE i.name LIKE 'plan-fleet-%'");
    // Instances that left, kept until retention deletes them.
    st.execute(
        "INSERT INTO rollcall.instances (id, namespace, deployment_id, name, token_hash,"
            + " lease_expires_at, state, ended_at, end_reason) SELECT gen_random_uuid(), 'small',"
            + " 'plan-old-deploy', 'plan-left-' || g, decode(md5('plan-left-' || g), 'hex'),"
            + " now() - interval '2 hours' + g * interval '1 millisecond', 'left',"
            + " now() - interval '2 hours', 'left' FROM generate_series(1, "
            + 2 * FLEET
            + ") g");
    st.execute("ANALYZE rollcall.instances");
    st.execute("ANALYZE rollcall.ownership");
    st.execute(
        "UPDATE rollcall.instances SET lease_expires_at = now() + interval '10 seconds'"
            + " WHERE name LIKE 'plan-fleet-%'");
  }
}
