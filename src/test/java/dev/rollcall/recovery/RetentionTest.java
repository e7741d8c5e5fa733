package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Batch;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.RollcallTestResource;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import dev.rollcall.testing.TimeTravel;
import io.smallrye.mutiny.Uni;
import jakarta.inject.Inject;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Storage stays bounded: old passes and ended instances go, and sweeps stop repeating rows. */
@ServiceTest
class RetentionTest extends ApiTestBase {

  @Inject Retention retention;
  @Inject dev.rollcall.database.Databases databases;
  @Inject Sweeper sweeper;

  String deploy;

  @BeforeEach
  void fresh() {
    deploy = UUID.randomUUID().toString();
  }

  /** A whole boot pass of the small namespace; returns its epoch. */
  long bootPass(Instance a) {
    long epoch = -1;
    for (Batch b; (b = api.claimBatch(a, 7)) != null; ) {
      api.complete(a, b, List.of(b.runIds().get(0))).expect(200);
      epoch = b.epochId();
    }
    return epoch;
  }

  static long rows(String table, String where, Object... params) {
    return Db.number("SELECT count(*) FROM rollcall." + table + " WHERE " + where, params);
  }

  @Test
  void epochsClosedLongerAgoThanTheAgeAndEndedInstancesGoEverythingElseStays() {
    // An old pass, by an instance that left long ago.
    Instance old = api.register(SourceTables.SMALL, "old-" + deploy, "old");
    long oldEpoch = bootPass(old);
    api.leave(old).expect(204);
    Db.update(
        "UPDATE rollcall.epochs SET closed_at = now() - interval '4 days' WHERE id = ?", oldEpoch);
    Db.update(
        "UPDATE rollcall.instances SET ended_at = now() - interval '4 days' WHERE id = ?",
        old.id());
    // Its takeover (nothing to take over: closed at once) is what refers to the instance now.
    Db.update(
        "UPDATE rollcall.epochs SET state = 'closed', closed_at = now() - interval '4 days'"
            + " WHERE subject_instance_id = ?",
        old.id());
    assertTrue(rows("ledger", "epoch_id = ?", oldEpoch) > 0);
    assertTrue(rows("batches", "epoch_id = ? AND retry_of IS NOT NULL", oldEpoch) > 0);
    // A recent pass, and an old one still open: both stay.
    Instance recent = api.register(SourceTables.SMALL, "recent-" + deploy, "recent");
    Batch open = api.claimBatch(recent, 3);
    Db.update(
        "UPDATE rollcall.epochs SET created_at = now() - interval '5 days' WHERE id = ?",
        open.epochId());

    Retention.Pass pass = retention.runOnce().await().indefinitely();

    assertTrue(pass.ran() && pass.finished(), pass::toString);
    assertEquals(0, rows("epochs", "id = ?", oldEpoch));
    assertEquals(0, rows("ledger", "epoch_id = ?", oldEpoch));
    assertEquals(0, rows("batches", "epoch_id = ?", oldEpoch));
    assertEquals(0, rows("instances", "id = ?", old.id()));
    assertEquals(
        0,
        Db.number(
            "SELECT count(*) FROM rollcall.batch_runs r WHERE NOT EXISTS"
                + " (SELECT 1 FROM rollcall.batches b WHERE b.id = r.batch_id)"));
    assertEquals(1, rows("epochs", "id = ? AND state = 'open'", open.epochId()));
    // Its batch in flight (its hand-outs are written at their outcome) stays with its runs.
    assertTrue(rows("hand_outs_in_flight", "epoch_id = ?", open.epochId()) > 0);
    assertEquals(1, rows("instances", "id = ?", recent.id()));
    // The admin API still answers for what is kept, and for what is gone.
    api.send("GET", "admin/epochs/" + open.epochId(), RollcallTestResource.ADMIN_TOKEN, null)
        .expect(200);
    api.send("GET", "admin/epochs/" + oldEpoch, RollcallTestResource.ADMIN_TOKEN, null).expect(404);
    api.complete(recent, open, List.of()).expect(200);
    api.post("admin/epochs/" + open.epochId() + "/close", RollcallTestResource.ADMIN_TOKEN, null);
  }

  @Test
  void oneRetentionPassAtATimeAcrossReplicas() {
    List<Retention.Pass> passes =
        Uni.join()
            .all(
                retention.runOnce(databases.primary()),
                retention.runOnce(databases.primary()),
                retention.runOnce(databases.primary()))
            .andFailFast()
            .await()
            .indefinitely();

    assertEquals(1, passes.stream().filter(Retention.Pass::ran).count(), passes::toString);
    // Right after a pass the lease holds for half an interval: no replica starts another.
    assertFalse(retention.runOnce(databases.primary()).await().indefinitely().ran());
  }

  @Test
  void eachDatabaseHasItsOwnTurn() {
    List<Retention.Pass> passes =
        Uni.join()
            .all(retention.runOnce(), retention.runOnce(), retention.runOnce())
            .andFailFast()
            .await()
            .indefinitely();
    // Two databases, one turn each: two of the three replicas' passes ran (each in one database,
    // or one in both), and never the same database twice.
    assertTrue(passes.stream().filter(Retention.Pass::ran).count() >= 1, passes::toString);
    assertEquals(
        List.of("t", "t"),
        List.of(
            Db.column(
                    "SELECT lease_until > now() FROM rollcall.housekeeping WHERE job = 'retention'")
                .get(0),
            dev.rollcall.testing.RollcallTestResource.second()
                .column(
                    "SELECT lease_until > now() FROM rollcall.housekeeping WHERE job = 'retention'")
                .get(0)));
  }

  @Test
  void sweepsCountEverySkipButWriteARunsSkipToTheLedgerOnlyOnce() {
    String table = SourceTables.table(SourceTables.ACTIVE);
    Instance client = api.register(SourceTables.ACTIVE, deploy, "sweep-client");
    api.drain(client, 5000);
    TimeTravel.namespaceRegisteredEarlier(SourceTables.ACTIVE, Duration.ofHours(1));
    String parked = "wrun_parked_" + deploy;
    Db.update(
        "INSERT INTO "
            + table
            + " (id, workflow_name, status, updated_at)"
            + " VALUES (?, 'w', 'running', now() - interval '1 hour')",
        parked);
    long lastSweep = -1;
    for (int sweep = 0; sweep < 4; sweep++) {
      TimeTravel.sweepsClosedADayAgo();
      // Each sweep comes minutes after the last hand-out, by the database's clock.
      Db.update(
          "UPDATE rollcall.ledger SET resolved_at = resolved_at - interval '10 minutes',"
              + " recorded_at = recorded_at - interval '10 minutes' WHERE run_id = ?",
          parked);
      sweeper.runOnce().await().indefinitely();
      Db.update(
          "UPDATE rollcall.epochs SET created_at = created_at - interval '1 hour'"
              + " WHERE kind = 'sweep' AND state = 'open'");
      for (Batch b; (b = api.claimBatch(client, 5000)) != null; ) {
        lastSweep = b.epochId();
        api.complete(client, b, List.of()).expect(200);
      }
      lastSweep =
          Db.number(
              "SELECT max(id) FROM rollcall.epochs WHERE kind = 'sweep' AND namespace = ?",
              SourceTables.ACTIVE);
    }

    // Handed out once, then skipped by three sweeps: one ledger row says why.
    assertEquals(
        1,
        rows(
            "ledger",
            "run_id = ? AND outcome = 'skipped' AND reason = 'unchanged-since-redrive'",
            parked));
    assertEquals(1, rows("ledger", "run_id = ? AND outcome = 'enqueued'", parked));
    Api.Reply view =
        api.send("GET", "admin/epochs/" + lastSweep, RollcallTestResource.ADMIN_TOKEN, null)
            .expect(200);
    assertTrue(
        view.body().get("skippedByReason").get("unchanged-since-redrive").asLong() >= 1,
        view.raw());
    assertTrue(view.body().get("runs").get("skipped").asLong() >= 1, view.raw());
    Db.update("UPDATE " + table + " SET status = 'completed' WHERE id = ?", parked);
  }
}
