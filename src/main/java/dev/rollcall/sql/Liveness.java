package dev.rollcall.sql;

/**
 * The liveness test for statements that find instance rows by id (or join them by id from rows they
 * found otherwise): {@code rollcall.is_live_at} with the transaction's clock given as an InitPlan,
 * {@code (SELECT now())}, the same value {@code now()} has in the statement.
 *
 * <p>Written {@code rollcall.is_live(state, lease_expires_at)}, the test plans as {@code
 * lease_expires_at > now()} on the partial index {@code instances_live_by_lease}, and the planner
 * estimates it from statistics in which every live lease lies in the past (leases move ahead of the
 * last ANALYZE with every heartbeat). It then believes about one instance is live and reads every
 * live lease to find the few ids it was given: a heartbeat flush or a leave cost a read of the
 * whole fleet. A clock the planner cannot see leaves it the primary key (V17__liveness_by_id.sql;
 * {@code LivenessPlanTest}). Statements over a namespace's live instances keep {@code
 * rollcall.is_live}.
 *
 * <p>It is the Java side of a rule the schema holds (V9, V17), written into statements of {@code
 * registry}, {@code queue} and {@code recovery} alike, so it belongs to none of them: here, beside
 * the other SQL those packages share, a queue statement does not depend on the registry.
 */
public final class Liveness {

  private Liveness() {}

  /** True when the instance row {@code alias} (e.g. {@code "i."}, or {@code ""}) is live. */
  public static String liveById(String alias) {
    return "rollcall.is_live_at(" + alias + "state, " + alias + "lease_expires_at, (SELECT now()))";
  }
}
