package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Batch;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.Poll;
import dev.rollcall.testing.RollcallTestResource;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A hand-out's ledger row is written once, with its outcome (V18): nothing at the claim, one row
 * per run at the complete, a re-let or a close. While its batch is leased, the admin API, a pass's
 * progress and a sweep's "re-driven since" read the hand-out from the batch. A close and a complete
 * of one batch, in either order or at the same instant, leave one row per hand-out and nothing
 * handed out again in the closed pass.
 */
@ServiceTest
class HandOutLedgerTest extends ApiTestBase {

  String deploy;

  @BeforeEach
  void freshDeploy() {
    deploy = UUID.randomUUID().toString();
  }

  Api.Reply admin(String method, String path) {
    return api.send(method, path, RollcallTestResource.ADMIN_TOKEN, null);
  }

  static long rows(Batch batch) {
    return Db.number(
        "SELECT count(*) FROM rollcall.ledger WHERE batch_id = ? AND fence = ?",
        batch.id(),
        batch.fence());
  }

  static Set<String> failedRuns(Batch batch) {
    return Db.set(
        "SELECT run_id FROM rollcall.ledger WHERE batch_id = ? AND outcome = 'failed'", batch.id());
  }

  /** Batches and ranges of the epoch that could still be handed out. */
  static long leftToHandOut(long epochId) {
    return Db.number(
        "SELECT count(*) FROM rollcall.batches WHERE epoch_id = ?"
            + " AND state IN ('scanning', 'ready', 'leased')",
        epochId);
  }

  /** The run's entries of the admin API's run ledger that belong to the batch. */
  List<JsonNode> entriesOf(String run, Batch batch) {
    JsonNode ledger =
        admin("GET", "admin/runs/" + run + "?namespace=" + SourceTables.LARGE)
            .expect(200)
            .body()
            .get("ledger");
    List<JsonNode> of = new java.util.ArrayList<>();
    ledger.forEach(
        e -> {
          if (e.path("batchId").asLong() == batch.id()) {
            of.add(e);
          }
        });
    return of;
  }

  @Test
  void aClaimWritesNoLedgerRowAndItsCompleteWritesEachHandOutOnce() {
    Instance instance = api.register(SourceTables.LARGE, deploy, "once");
    Batch batch = api.claimBatch(instance, 50);
    int runs = batch.runIds().size();
    assertTrue(runs >= 2, "a batch of several runs: " + runs);
    String run = batch.runIds().get(0);

    assertEquals(0, rows(batch), "nothing written to the ledger at the claim");
    List<JsonNode> inFlight = entriesOf(run, batch);
    assertEquals(1, inFlight.size(), inFlight.toString());
    assertEquals("leased", inFlight.get(0).get("outcome").asText());
    assertTrue(inFlight.get(0).get("id").isNull(), "no ledger row yet: " + inFlight);
    assertEquals(instance.id().toString(), inFlight.get(0).get("instanceId").asText());
    assertTrue(
        Db.number("SELECT handed_out FROM rollcall.epoch_progress WHERE id = ?", batch.epochId())
            >= runs,
        "the pass's progress counts the batch in flight");

    String failed = batch.runIds().get(1);
    api.complete(instance, batch, List.of(failed)).expect(200);
    api.complete(instance, batch, List.of(failed)).expect(200);

    assertEquals(runs, rows(batch), "one row per run, once, however often the complete is sent");
    assertEquals(Set.of(failed), failedRuns(batch));
    assertEquals(
        0,
        Db.number(
            "SELECT count(*) FROM rollcall.ledger l JOIN rollcall.batches b ON b.id = l.batch_id"
                + " WHERE l.batch_id = ? AND (l.instance_id IS DISTINCT FROM b.claimer_id"
                + " OR l.recorded_at <> b.leased_at OR l.resolved_at IS NULL"
                + " OR l.epoch_id <> b.epoch_id OR l.namespace <> ?)",
            batch.id(),
            SourceTables.LARGE),
        "each row names its holder, its pass, and when it was handed out and resolved");
    assertEquals("enqueued", entriesOf(run, batch).get(0).get("outcome").asText());
    assertNotNull(entriesOf(run, batch).get(0).get("id").numberValue());
  }

  @Test
  void handOutsWrittenBeforeTheChangeAreResolvedInPlaceNotWrittenAgain() {
    Instance instance = api.register(SourceTables.LARGE, deploy, "upgraded");
    Batch batch = api.claimBatch(instance, 20);
    int runs = batch.runIds().size();
    // A batch leased by a service that wrote its hand-outs at the claim (before V18).
    Db.update(
        "INSERT INTO rollcall.ledger (namespace, run_id, epoch_id, batch_id, fence, instance_id,"
            + " reason, outcome) SELECT ?, run_id, ?, batch_id, ?, ?, reason, 'leased'"
            + " FROM rollcall.batch_runs WHERE batch_id = ?",
        SourceTables.LARGE,
        batch.epochId(),
        batch.fence(),
        instance.id(),
        batch.id());
    assertEquals(
        1, entriesOf(batch.runIds().get(0), batch).size(), "shown once, from its written row");

    api.complete(instance, batch, List.of()).expect(200);

    assertEquals(runs, rows(batch));
    assertEquals(
        Set.of("enqueued"),
        Db.set("SELECT DISTINCT outcome FROM rollcall.ledger WHERE batch_id = ?", batch.id()));
  }

  @Test
  void aBatchGivenUpIsWrittenAbandonedAndItsHolderMayStillCompleteIt() {
    Instance instance = api.register(SourceTables.LARGE, deploy, "given-up");
    Batch batch = api.claimBatch(instance, 20);
    int runs = batch.runIds().size();

    admin("POST", "admin/epochs/" + batch.epochId() + "/close").expect(200);

    assertEquals(runs, rows(batch));
    assertEquals(
        Set.of("abandoned"),
        Db.set("SELECT DISTINCT outcome FROM rollcall.ledger WHERE batch_id = ?", batch.id()));
    assertEquals(
        Set.of(instance.id().toString()),
        Db.set(
            "SELECT DISTINCT instance_id::text FROM rollcall.ledger WHERE batch_id = ?",
            batch.id()));

    api.complete(instance, batch, List.of()).expect(200);

    assertEquals(runs, rows(batch), "the abandoned rows are resolved, not written again");
    assertEquals(
        Set.of("enqueued"),
        Db.set("SELECT DISTINCT outcome FROM rollcall.ledger WHERE batch_id = ?", batch.id()));
  }

  /**
   * A close and its batch's complete, at the same instant, in either order: each waits for the
   * batch's row, which a third session holds until both wait behind it. Whichever goes first, each
   * hand-out has one row, and the complete's outcome is the one kept. A close that read the batch
   * without locking its row would give up a batch already completed and write its runs again.
   */
  @Test
  void aCloseAndACompleteAtTheSameInstantWriteEachHandOutOnceCompleteFirst() throws Exception {
    closeAndCompleteTogether(true);
  }

  @Test
  void aCloseAndACompleteAtTheSameInstantWriteEachHandOutOnceCloseFirst() throws Exception {
    closeAndCompleteTogether(false);
  }

  private void closeAndCompleteTogether(boolean completeFirst) throws Exception {
    Instance instance = api.register(SourceTables.LARGE, deploy, "raced");
    Batch batch = api.claimBatch(instance, 20);
    int runs = batch.runIds().size();
    String failed = batch.runIds().get(0);
    Supplier<Api.Reply> complete = () -> api.complete(instance, batch, List.of(failed));
    Supplier<Api.Reply> close = () -> admin("POST", "admin/epochs/" + batch.epochId() + "/close");

    CompletableFuture<Api.Reply> first;
    CompletableFuture<Api.Reply> second;
    try (Connection holder =
        Db.holding("SELECT 1 FROM rollcall.batches WHERE id = ? FOR UPDATE", batch.id())) {
      // PostgreSQL queues the waiters of one row in the order they came: the first to wait goes
      // first once the holder lets go.
      first = CompletableFuture.supplyAsync(completeFirst ? complete : close);
      waitersOfTheBatchRow(1);
      second = CompletableFuture.supplyAsync(completeFirst ? close : complete);
      waitersOfTheBatchRow(2);
      holder.rollback();
    }
    Api.Reply firstReply = first.get(30, TimeUnit.SECONDS);
    Api.Reply secondReply = second.get(30, TimeUnit.SECONDS);
    firstReply.expect(200);
    secondReply.expect(200);

    assertEquals(runs, rows(batch), "one row per hand-out, whichever came first");
    assertEquals(Set.of(failed), failedRuns(batch));
    assertEquals(
        Set.of("enqueued", "failed"),
        Db.set("SELECT DISTINCT outcome FROM rollcall.ledger WHERE batch_id = ?", batch.id()),
        "the complete's outcome is kept");
    assertEquals(
        Set.of(instance.id().toString()),
        Db.set(
            "SELECT DISTINCT instance_id::text FROM rollcall.ledger WHERE batch_id = ?",
            batch.id()));
    assertEquals(
        0,
        Db.number(
            "SELECT count(*) FROM rollcall.hand_outs_in_flight WHERE batch_id = ?", batch.id()),
        "nothing left in flight");
    assertEquals(
        "completed",
        Db.column("SELECT state FROM rollcall.batches WHERE id = ?", batch.id()).get(0));
    assertEquals(
        "closed",
        Db.column("SELECT state FROM rollcall.epochs WHERE id = ?", batch.epochId()).get(0));
    assertEquals(
        0,
        leftToHandOut(batch.epochId()),
        "a closed pass hands nothing out again, not even the complete's failed run");
  }

  /** A holder completing after its pass was closed: its failed runs are not handed out again. */
  @Test
  void aBatchGivenUpIsNotHandedOutAgainForItsFailedRuns() {
    Instance instance = api.register(SourceTables.LARGE, deploy, "late");
    Batch batch = api.claimBatch(instance, 20);
    admin("POST", "admin/epochs/" + batch.epochId() + "/close").expect(200);

    JsonNode answer =
        api.complete(instance, batch, List.of(batch.runIds().get(0))).expect(200).body();

    assertEquals(1, answer.get("failed").asInt(), answer.toString());
    assertEquals(0, answer.get("retried").asInt(), "nothing is handed out again: " + answer);
    assertEquals(0, leftToHandOut(batch.epochId()));
  }

  private static void waitersOfTheBatchRow(int n) {
    Poll.until(
        n + " sessions waiting for the batch's row",
        Duration.ofSeconds(10),
        () ->
            Db.number(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                        + " AND query LIKE '%rollcall.batches%' AND pid <> pg_backend_pid()")
                >= n);
  }

  /**
   * V19 gives up the ready batches and scanning ranges that closed passes kept before this version,
   * and nothing of an open pass.
   */
  @Test
  void theMigrationGivesUpWhatClosedPassesKeptToHandOut() throws Exception {
    String ns = "kept-" + UUID.randomUUID();
    Instance scanner = api.register(SourceTables.SMALL, deploy, "scanner");
    long closed = openEpoch(ns, "manual");
    long open = openEpoch(ns, "manual");
    long kept = readyBatch(closed);
    long scanning =
        Db.number(
            "INSERT INTO rollcall.batches (epoch_id, state, fence, attempts, claimer_id, leased_at,"
                + " lease_expires_at, run_count, scan_run_ids) VALUES (?, 'scanning', 1, 0, ?,"
                + " now(), now() + interval '1 minute', 0, '{r-1}') RETURNING id",
            closed,
            scanner.id());
    long waiting = readyBatch(open);
    Db.update("UPDATE rollcall.epochs SET state = 'closed' WHERE id = ?", closed);
    String migration;
    try (var in =
        getClass()
            .getClassLoader()
            .getResourceAsStream("db/migration/V19__closed_passes_keep_nothing_to_hand_out.sql")) {
      migration = new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }

    try {
      Db.update(migration);

      assertEquals(
          List.of("abandoned"), Db.column("SELECT state FROM rollcall.batches WHERE id = ?", kept));
      assertEquals(
          List.of("abandoned"),
          Db.column("SELECT state FROM rollcall.batches WHERE id = ?", scanning));
      assertEquals(
          List.of("ready"), Db.column("SELECT state FROM rollcall.batches WHERE id = ?", waiting));
    } finally {
      Db.update("UPDATE rollcall.batches SET state = 'abandoned' WHERE id = ?", waiting);
      Db.update("UPDATE rollcall.epochs SET state = 'closed' WHERE id = ?", open);
    }
  }

  static long readyBatch(long epoch) {
    return Db.number(
        "INSERT INTO rollcall.batches (epoch_id, state, fence, attempts, run_count)"
            + " VALUES (?, 'ready', 0, 1, 0) RETURNING id",
        epoch);
  }

  /**
   * A sweep skips a run that the engine has not touched since another epoch re-drove it. A hand-out
   * still in flight in another epoch counts from its lease, and before any written row; the sweep's
   * own epoch does not count.
   */
  @Test
  void aSweepCountsARunInFlightInAnotherEpochAsReDriven() throws Exception {
    String ns = "in-flight-" + UUID.randomUUID();
    Instance holder = api.register(SourceTables.SMALL, deploy, "holder");
    long other = openEpoch(ns, "manual");
    long sweep = openEpoch(ns, "sweep");
    long closed = openEpoch(ns, "manual");
    Db.update("UPDATE rollcall.epochs SET state = 'closed' WHERE id = ?", closed);
    leasedBatch(other, holder, "5 minutes", "r-in-flight");
    leasedBatch(sweep, holder, "1 minute", "r-own-epoch");
    for (String[] row :
        List.of(
            new String[] {"r-in-flight", "60 minutes"},
            new String[] {"r-enqueued", "3 minutes"},
            new String[] {"r-own-epoch", "90 minutes"})) {
      Db.update(
          "INSERT INTO rollcall.ledger (namespace, run_id, epoch_id, reason, outcome,"
              + " recorded_at, resolved_at) VALUES (?, ?, ?, 'dead-owner', 'enqueued',"
              + " now() - ?::interval, now() - ?::interval)",
          ns,
          row[0],
          closed,
          row[1],
          row[1]);
    }

    Map<String, Long> minutesAgo = new HashMap<>();
    try (Connection c = Db.database().connect();
        Statement s = c.createStatement()) {
      s.execute("PREPARE since(text, text[], bigint) AS " + Classifier.UNCHANGED_SINCE_REDRIVE);
      try (ResultSet r =
          s.executeQuery(
              "EXECUTE since('"
                  + ns
                  + "', '{r-in-flight,r-enqueued,r-own-epoch,r-never}', "
                  + sweep
                  + ")")) {
        while (r.next()) {
          minutesAgo.put(
              r.getString("run_id"),
              Math.round((System.currentTimeMillis() - r.getTimestamp("at").getTime()) / 60_000.0));
        }
      }
    } finally {
      Db.update(
          "UPDATE rollcall.batches SET state = 'abandoned' WHERE epoch_id IN (?, ?)", other, sweep);
      Db.update("UPDATE rollcall.epochs SET state = 'closed' WHERE id IN (?, ?)", other, sweep);
    }

    assertEquals(
        Map.of("r-in-flight", 5L, "r-enqueued", 3L, "r-own-epoch", 90L),
        minutesAgo,
        "in flight elsewhere: its lease; else its last enqueued row; never: not re-driven");
  }

  static long openEpoch(String namespace, String kind) {
    return Db.number(
        "INSERT INTO rollcall.epochs (namespace, kind, scan_done) VALUES (?, ?, true) RETURNING id",
        namespace,
        kind);
  }

  static void leasedBatch(long epoch, Instance claimer, String leasedAgo, String run) {
    long batch =
        Db.number(
            "INSERT INTO rollcall.batches (epoch_id, state, fence, attempts, claimer_id,"
                + " leased_at, lease_expires_at, run_count) VALUES (?, 'leased', 1, 1, ?,"
                + " now() - ?::interval, now() + interval '1 hour', 1) RETURNING id",
            epoch,
            claimer.id(),
            leasedAgo);
    Db.update(
        "INSERT INTO rollcall.batch_runs (batch_id, run_id, reason) VALUES (?, ?, 'dead-owner')",
        batch,
        run);
  }
}
