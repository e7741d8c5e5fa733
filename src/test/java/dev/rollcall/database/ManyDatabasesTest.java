package dev.rollcall.database;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.recovery.Reaper;
import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Batch;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.RollcallTestResource;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import dev.rollcall.testing.TestDatabase;
import jakarta.inject.Inject;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * One service serving two databases: the default datasource, and {@code second} (a database of its
 * own, {@link SourceTables#SECOND}'s). Each namespace's instances, passes, batches, ledger and
 * switches live in its own database; ids are each database's own, and the same id in both is two
 * different things.
 */
@ServiceTest
class ManyDatabasesTest extends ApiTestBase {

  private static final String ADMIN = RollcallTestResource.ADMIN_TOKEN;

  @Inject Reaper reaper;

  private static TestDatabase second() {
    return RollcallTestResource.second();
  }

  /** Epochs and batches of both databases numbered from {@code next} on: the same ids in both. */
  private static void sameIdsInBoth(long next) {
    for (String table : List.of("epochs", "batches")) {
      String restart = "ALTER TABLE rollcall." + table + " ALTER COLUMN id RESTART WITH " + next;
      Db.update(restart);
      second().update(restart);
    }
  }

  @Test
  void theSecondDatabaseHasEveryMigrationOfTheDefaultOne() {
    String applied =
        "SELECT string_agg(version, ',' ORDER BY installed_rank) FROM rollcall.flyway_schema_history"
            + " WHERE success AND version IS NOT NULL";
    assertEquals(Db.column(applied), second().column(applied));
  }

  @Test
  void anInstanceOfTheSecondDatabasesNamespaceLivesThereAndItsTokenSaysSo() {
    Instance b = api.register(SourceTables.SECOND, "d1", "b");
    assertTrue(b.token().endsWith("." + SourceTables.SECOND_DATABASE), b.token());
    String count = "SELECT count(*) FROM rollcall.instances WHERE id = ?::uuid";
    assertEquals(List.of("1"), second().column(count, b.id().toString()));
    assertEquals(0, Db.number(count, b.id().toString()));

    second()
        .update(
            "UPDATE rollcall.instances SET lease_expires_at = now() + interval '1 second'"
                + " WHERE id = ?::uuid",
            b.id().toString());
    api.heartbeat(b).expect(200);
    assertEquals(
        List.of("t"),
        second()
            .column(
                "SELECT lease_expires_at > now() + interval '5 seconds' FROM rollcall.instances"
                    + " WHERE id = ?::uuid",
                b.id().toString()));
  }

  @Test
  void aTokenNamingADatabaseTheServiceDoesNotKnowIsRefused() {
    Instance b = api.register(SourceTables.SECOND, "d1", "b");
    String forged = b.token().substring(0, b.token().lastIndexOf('.')) + ".nowhere";
    api.post("instances/" + b.id() + "/heartbeat", forged, null).expect(401);
  }

  @Test
  void bootPassesInBothDatabasesWithTheSameIdsEachHandOutTheirOwnRuns() {
    sameIdsInBoth(5_000);
    Instance a = api.register(SourceTables.SMALL, "d1", "a");
    Instance b = api.register(SourceTables.SECOND, "d1", "b");

    // The first batch of each: the same batch id and epoch id, in two databases.
    Batch first = api.claimBatch(b, 7);
    Batch firstOfA = api.claimBatch(a, 7);
    assertEquals(firstOfA.id(), first.id(), "the same batch id in both databases");
    assertEquals(firstOfA.epochId(), first.epochId(), "the same epoch id in both databases");
    // Completing one is not completing the other.
    api.complete(b, first, List.of()).expect(200);
    assertEquals(
        List.of("leased"),
        Db.column("SELECT state FROM rollcall.batches WHERE id = ?", firstOfA.id()));
    api.complete(a, firstOfA, List.of()).expect(200);

    Set<String> handedB = new HashSet<>(first.runIds());
    api.drain(b, 7).forEach(batch -> handedB.addAll(batch.runIds()));
    Set<String> handedA = new HashSet<>(firstOfA.runIds());
    api.drain(a, 7).forEach(batch -> handedA.addAll(batch.runIds()));

    assertEquals(SourceTables.SECOND_ACTIVE, handedB.size());
    assertEquals(SourceTables.SMALL_ACTIVE, handedA.size());
    String closed =
        "SELECT count(*) FROM rollcall.epochs WHERE namespace = ? AND kind = 'boot'"
            + " AND state = 'closed'";
    assertEquals(List.of("1"), second().column(closed, SourceTables.SECOND));
    assertEquals(1, Db.number(closed, SourceTables.SMALL));
    String enqueued =
        "SELECT count(DISTINCT run_id) FROM rollcall.ledger WHERE outcome = 'enqueued'"
            + " AND epoch_id IN (SELECT id FROM rollcall.epochs WHERE namespace = ?)";
    assertEquals(
        List.of(String.valueOf(SourceTables.SECOND_ACTIVE)),
        second().column(enqueued, SourceTables.SECOND));
    assertEquals(0, Db.number(enqueued, SourceTables.SECOND), "nothing of it in the default one");
  }

  @Test
  void aDeathInTheSecondDatabaseIsDeclaredAndTakenOverThere() {
    List<String> held =
        second()
            .column(
                "SELECT id FROM "
                    + SourceTables.table(SourceTables.SECOND)
                    + " WHERE status IN ('pending', 'running') ORDER BY id LIMIT 3");
    Instance dying = api.register(SourceTables.SECOND, "old-deploy", "dying");
    api.heartbeat(dying, held).expect(200);
    // A new deploy's boot pass leaves the runs a live owner executes to it.
    Instance peer = api.register(SourceTables.SECOND, "d2", "peer");
    Set<String> booted = new HashSet<>();
    api.drain(peer, 100).forEach(batch -> booted.addAll(batch.runIds()));
    assertEquals(SourceTables.SECOND_ACTIVE - held.size(), booted.size(), booted.toString());
    second()
        .update(
            "UPDATE rollcall.instances SET lease_expires_at = now() - interval '1 second'"
                + " WHERE id = ?::uuid",
            dying.id().toString());

    Reaper.Pass pass = reaper.runOnce().await().indefinitely();

    assertEquals(1, pass.reaped(), pass.toString());
    assertEquals(
        List.of("dead|lease-expired"),
        second()
            .column(
                "SELECT state || '|' || end_reason FROM rollcall.instances WHERE id = ?::uuid",
                dying.id().toString()));
    List<String> takenOver = new ArrayList<>();
    for (Batch batch : api.drain(peer, 100)) {
      takenOver.addAll(batch.runIds());
    }
    assertEquals(new HashSet<>(held), new HashSet<>(takenOver));
    assertEquals(
        List.of("closed"),
        second()
            .column(
                "SELECT state FROM rollcall.epochs WHERE kind = 'takeover'"
                    + " AND subject_instance_id = ?::uuid",
                dying.id().toString()));
  }

  @Test
  void anOperatorsSwitchIsWrittenInTheNamespacesOwnDatabase() {
    api.send(
            "PUT",
            "admin/namespaces/" + SourceTables.SECOND + "/recovery",
            ADMIN,
            "{\"bootRecovery\":false}")
        .expect(200);
    try {
      assertEquals(
          List.of("f"),
          second()
              .column(
                  "SELECT boot_recovery FROM rollcall.namespace_settings WHERE namespace = ?",
                  SourceTables.SECOND));
      Instance b = api.register(SourceTables.SECOND, "d3", "b");
      Api.Reply r = api.claim(b, 10).expect(200);
      assertEquals("done", r.text("status"), "boot recovery is off in its database: " + r);
    } finally {
      api.send(
              "PUT",
              "admin/namespaces/" + SourceTables.SECOND + "/recovery",
              ADMIN,
              "{\"bootRecovery\":true}")
          .expect(200);
    }
  }

  @Test
  void anOperatorEvictsAnInstanceOfTheSecondDatabase() {
    Instance b = api.register(SourceTables.SECOND, "d4", "b");
    api.post("admin/instances/" + b.id() + "/evict", ADMIN, null).expect(200);
    assertEquals(
        List.of("dead"),
        second()
            .column("SELECT state FROM rollcall.instances WHERE id = ?::uuid", b.id().toString()));
  }

  @Test
  void theAdminApiListsTheDefaultDatabasesNamespaces() {
    Api.Reply r = api.send("GET", "admin/namespaces", ADMIN, null).expect(200);
    List<String> listed = new ArrayList<>();
    r.body().get("items").forEach(n -> listed.add(n.get("name").asText()));
    assertTrue(listed.contains(SourceTables.SMALL), listed.toString());
    assertFalse(listed.contains(SourceTables.SECOND), listed.toString());
    assertNotNull(r.body().get("items"));
  }
}
