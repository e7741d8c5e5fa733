package dev.rollcall.testing;

import dev.rollcall.testing.Api.Instance;
import java.time.Duration;

/**
 * Moves rows into the past. The database's {@code now()} is the only clock the service decides by,
 * so tests age leases, registrations and engine activity instead of sleeping.
 */
public final class TimeTravel {

  private TimeTravel() {}

  /** The instance's lease ran out a second ago (and it was not reaped). */
  public static void leaseExpired(Instance instance) {
    leaseExpired(instance, Duration.ofSeconds(1));
  }

  /** The instance's lease ran out {@code ago} ago (and it was not reaped). */
  public static void leaseExpired(Instance instance, Duration ago) {
    Db.update(
        "UPDATE rollcall.instances SET lease_expires_at = now() - ?::bigint * interval '1 millisecond'"
            + " WHERE id = ?",
        ago.toMillis(),
        instance.id());
  }

  /**
   * The run's deferrals (in any epoch) were made an hour earlier than they were: all are due. The
   * run's ledger history moves back with them, so that what happened before or after a deferral
   * (another epoch's hand-out, say) still did.
   */
  public static void deferredAnHourAgo(String runId) {
    Db.update(
        "UPDATE rollcall.deferred SET deferred_at = deferred_at - interval '1 hour'"
            + " WHERE run_id = ?",
        runId);
    Db.update(
        "UPDATE rollcall.ledger SET recorded_at = recorded_at - interval '1 hour',"
            + " resolved_at = resolved_at - interval '1 hour' WHERE run_id = ?",
        runId);
  }

  /** The batch's (or scanning range's) lease ran out a second ago. */
  public static void batchLeaseExpired(long batchId) {
    Db.update(
        "UPDATE rollcall.batches SET lease_expires_at = now() - interval '1 second' WHERE id = ?",
        batchId);
  }

  /** The instance registered {@code ago} earlier than it did. */
  public static void registeredEarlier(Instance instance, Duration ago) {
    Db.update(
        "UPDATE rollcall.instances SET registered_at = registered_at - ?::bigint * interval '1 millisecond'"
            + " WHERE id = ?",
        ago.toMillis(),
        instance.id());
  }

  /** Every instance of the namespace registered {@code ago} earlier than it did. */
  public static void namespaceRegisteredEarlier(String namespace, Duration ago) {
    Db.update(
        "UPDATE rollcall.instances SET registered_at = registered_at - ?::bigint * interval '1 millisecond'"
            + " WHERE namespace = ?",
        ago.toMillis(),
        namespace);
  }

  /**
   * The engine last touched these runs (updates, events, job locks) an hour earlier than it did:
   * past the activity fence (a fresh lock may be a live executor's).
   */
  public static void engineQuiet(String... runIds) {
    for (String runId : runIds) {
      Db.update(
          "UPDATE graphile_worker._private_jobs SET locked_at = locked_at - interval '1 hour'"
              + " WHERE locked_at IS NOT NULL AND rollcall.engine_run_id(payload) = ?",
          runId);
      Db.update(
          "UPDATE workflow.workflow_runs SET updated_at = updated_at - interval '1 hour',"
              + " created_at = created_at - interval '1 hour' WHERE id = ?",
          runId);
      Db.update(
          "UPDATE workflow.workflow_events SET created_at = created_at - interval '1 hour'"
              + " WHERE run_id = ?",
          runId);
    }
  }

  /** Every sweep so far is closed, and was opened a day earlier: the next one may open at once. */
  public static void sweepsClosedADayAgo() {
    Db.update(
        "UPDATE rollcall.epochs SET state = 'closed', close_reason = 'test',"
            + " created_at = created_at - interval '1 day' WHERE kind = 'sweep'");
  }
}
