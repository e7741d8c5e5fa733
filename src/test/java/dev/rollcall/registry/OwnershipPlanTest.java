package dev.rollcall.registry;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.testing.Plans;
import dev.rollcall.testing.ServiceTest;
import java.sql.Statement;
import org.junit.jupiter.api.Test;

/**
 * A heartbeat flush replaces its instances' in-flight sets by reading those instances' rows only,
 * through plain index scans. Written as a join of the flush's instances with the ownership tables,
 * the statement was planned as a sequential scan of every instance's rows once a flush held a few
 * dozen beats (as flushes do under load); read by bitmap scans, each probe of a set that changes
 * grew slower until the next vacuum. The plans are checked as PostgreSQL runs the function's
 * statement, with the function's settings: a flush of 100 beats against a fleet of 2 000 instances
 * executing four runs each, every run with its queue message. PL/pgSQL keeps the statement's plan
 * for the session, as a pooled connection keeps its prepared statements, and the function asks for
 * its generic plan at every call (V21: planned again at each call, the statement spent more time
 * being planned than running); the plan for these arguments is checked beside it.
 */
@ServiceTest
class OwnershipPlanTest {

  private static final int FLEET = 2000;
  private static final int FLUSH = 100;

  @Test
  void aFlushReadsTheRowsOfItsOwnInstancesOnly() throws Exception {
    // The flush's instances report their sets again, one run of each replaced by a new one.
    java.util.List<String> instances = new java.util.ArrayList<>();
    java.util.List<String> owners = new java.util.ArrayList<>();
    java.util.List<String> runs = new java.util.ArrayList<>();
    java.util.List<String> messages = new java.util.ArrayList<>();
    for (int g = 1; g <= FLUSH; g++) {
      instances.add(idOf(g));
      for (int r = 2; r <= 5; r++) {
        owners.add(idOf(g));
        runs.add("plan-run-" + g + "-" + r);
        messages.add("plan-message-" + g + "-" + r);
      }
    }
    for (String plan :
        Plans.explainAsCached(
            0,
            st -> {
              fleet(st);
              // The function's own settings (its SET clause), for the rest of this transaction.
              for (String setting : functionSettings(st)) {
                String[] kv = setting.split("=", 2);
                st.execute("SELECT set_config('" + kv[0] + "', '" + kv[1] + "', true)");
              }
            },
            functionStatement(),
            "uuid[], text[], uuid[], text[], text[]",
            String.join(
                ", ",
                array(instances),
                array(java.util.Collections.nCopies(FLUSH, "small")),
                array(owners),
                array(runs),
                array(messages)))) {
      assertFalse(plan.contains("Seq Scan on ownership"), plan);
      assertFalse(plan.contains("Bitmap"), plan);
      assertTrue(plan.contains("Index Scan using ownership_pkey"), plan);
      assertTrue(plan.contains("Index Scan using ownership_messages_pkey"), plan);
      assertTrue(plan.contains("Tid Scan on ownership "), plan);
      // One run and one message of each instance went, and one of each came.
      assertTrue(plan.contains("Tuples Inserted: " + FLUSH), plan);
    }
  }

  /**
   * The function runs its statement's generic plan, made once per session, rather than planning it
   * again with every flush's arrays: planning cost more than running it (0.4–1.0 ms a call against
   * 0.25–0.35 ms for a flush of a few steady sets). The plan it runs is the one checked above.
   */
  @Test
  void theFunctionRunsItsGenericPlan() throws Exception {
    try (java.sql.Connection c = dev.rollcall.testing.Db.database().connect();
        Statement st = c.createStatement()) {
      assertTrue(
          functionSettings(st).contains("plan_cache_mode=force_generic_plan"),
          "rollcall.replace_in_flight sets plan_cache_mode=force_generic_plan");
    }
  }

  /** The statement of {@code rollcall.replace_in_flight}, which {@link Ownership#REPLACE} calls. */
  private static String functionStatement() {
    String body =
        dev.rollcall.testing.Db.column(
                "SELECT prosrc FROM pg_proc WHERE oid = 'rollcall.replace_in_flight'::regproc")
            .get(0)
            .strip();
    assertTrue(body.startsWith("BEGIN") && body.endsWith("END"), body);
    body = body.substring("BEGIN".length(), body.length() - "END".length()).strip();
    return body.substring(0, body.length() - 1);
  }

  private static java.util.List<String> functionSettings(Statement st) throws Exception {
    java.util.List<String> settings = new java.util.ArrayList<>();
    try (var rs =
        st.executeQuery(
            "SELECT unnest(proconfig) FROM pg_proc"
                + " WHERE oid = 'rollcall.replace_in_flight'::regproc")) {
      while (rs.next()) {
        settings.add(rs.getString(1));
      }
    }
    assertFalse(settings.isEmpty(), "the function sets how it is planned");
    return settings;
  }

  private static String array(java.util.List<String> items) {
    return "'{" + String.join(",", items) + "}'";
  }

  private static String idOf(int n) {
    return String.format("00000000-0000-0000-0000-%012d", n);
  }

  /** Instance {@code n}'s id, for an SQL expression {@code n}. */
  private static String id(String n) {
    return "('00000000-0000-0000-0000-' || lpad((" + n + ")::text, 12, '0'))::uuid";
  }

  /** 2 000 live instances, each executing runs 1–4 with their messages; analyzed. */
  private static void fleet(Statement st) throws Exception {
    st.execute(
        "INSERT INTO rollcall.instances (id, namespace, deployment_id, name, token_hash,"
            + " lease_expires_at) SELECT "
            + id("g")
            + ", 'small', 'plan-deploy', 'plan-fleet-' || g,"
            + " decode(md5('plan-fleet-' || g), 'hex'), now() + interval '10 seconds'"
            + " FROM generate_series(1, "
            + FLEET
            + ") g");
    st.execute(
        "INSERT INTO rollcall.ownership (instance_id, run_id, namespace) SELECT "
            + id("g")
            + ", 'plan-run-' || g || '-' || r, 'small'"
            + " FROM generate_series(1, "
            + FLEET
            + ") g, generate_series(1, 4) r");
    st.execute(
        "INSERT INTO rollcall.ownership_messages (instance_id, message_id, run_id, namespace)"
            + " SELECT "
            + id("g")
            + ", 'plan-message-' || g || '-' || r, 'plan-run-' || g || '-' || r, 'small'"
            + " FROM generate_series(1, "
            + FLEET
            + ") g, generate_series(1, 4) r");
    st.execute("ANALYZE rollcall.instances, rollcall.ownership, rollcall.ownership_messages");
  }
}
