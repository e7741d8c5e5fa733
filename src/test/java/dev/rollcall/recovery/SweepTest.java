package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Batch;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import dev.rollcall.testing.TimeTravel;
import io.smallrye.mutiny.Uni;
import jakarta.inject.Inject;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Sweeps catch runs stranded between deploys: single flight, rate-bounded, not repetitive. */
@ServiceTest
class SweepTest extends ApiTestBase {

  @Inject Sweeper sweeper;

  String deploy;

  @BeforeEach
  void freshDeploy() {
    deploy = UUID.randomUUID().toString();
  }

  /**
   * An instance whose own deploy is recovered, so its claims see only shared work, and registered
   * long enough ago (by the database's clock) that its deploy is no longer booting.
   */
  Instance recovered(String namespace) {
    Instance i = api.register(namespace, deploy, "sweeper-client");
    api.drain(i, 5000);
    TimeTravel.namespaceRegisteredEarlier(namespace, Duration.ofHours(1));
    return i;
  }

  long openSweeps(String namespace) {
    return Db.number(
        "SELECT count(*) FROM rollcall.epochs WHERE namespace = ? AND kind = 'sweep'"
            + " AND state = 'open'",
        namespace);
  }

  @Test
  void replicasSweepingAtOnceOpenOneSweepPerNamespaceAndOnlyWhereAnInstanceIsLive() {
    recovered(SourceTables.SMALL);
    Db.update(
        "UPDATE rollcall.instances SET lease_expires_at = now() - interval '1 second'"
            + " WHERE namespace = ? AND state = 'live'",
        SourceTables.BENCH);

    Uni.join()
        .all(sweeper.runOnce(), sweeper.runOnce(), sweeper.runOnce())
        .andFailFast()
        .await()
        .indefinitely();
    sweeper.runOnce().await().indefinitely();

    assertEquals(1, openSweeps(SourceTables.SMALL));
    assertEquals(0, openSweeps(SourceTables.BENCH), "no live instance there");
  }

  @Test
  void aSweepHandsOutStrandedRunsAndTheNextSkipsThoseTheEngineHasNotTouchedSince() {
    String table = SourceTables.table(SourceTables.ACTIVE);
    Instance client = recovered(SourceTables.ACTIVE);
    // Runs stranded after the deploy was recovered: their wake-up was lost.
    List<String> stranded = List.of("wrun_s1_" + deploy, "wrun_s2_" + deploy, "wrun_s3_" + deploy);
    for (String id : stranded) {
      Db.update(
          "INSERT INTO "
              + table
              + " (id, workflow_name, status, updated_at)"
              + " VALUES (?, 'w', 'running', now() - interval '1 hour')",
          id);
    }
    sweeper.runOnce().await().indefinitely();
    assertTrue(api.heartbeat(client).expect(200).body().get("recoveryPending").asBoolean());

    Set<String> first = drain(client);

    assertEquals(Set.copyOf(stranded), first);
    // Ten minutes later, by the database's clock, the next sweep: nothing changed.
    TimeTravel.sweepsClosedADayAgo();
    Db.update(
        "UPDATE rollcall.ledger SET resolved_at = resolved_at - interval '10 minutes',"
            + " recorded_at = recorded_at - interval '10 minutes' WHERE run_id = ANY(?::text[])",
        "{" + String.join(",", stranded) + "}");
    Db.update(
        "UPDATE " + table + " SET updated_at = now() - interval '1 minute' WHERE id = ?",
        stranded.get(0));
    sweeper.runOnce().await().indefinitely();

    Set<String> second = drain(client);

    assertEquals(Set.of(stranded.get(0)), second, "only the run the engine touched since");
    assertEquals(
        Set.of(stranded.get(1), stranded.get(2)),
        Db.set(
            "SELECT run_id FROM rollcall.ledger WHERE reason = 'unchanged-since-redrive'"
                + " AND run_id = ANY(?::text[])",
            "{" + String.join(",", stranded) + "}"));
    Db.update(
        "UPDATE " + table + " SET status = 'completed' WHERE id = ANY(?::text[])",
        "{" + String.join(",", stranded) + "}");
  }

  @Test
  void noSweepStartsWhileADeployIsRecovering() {
    recovered(SourceTables.SMALL);
    Instance booting = api.register(SourceTables.SMALL, UUID.randomUUID().toString(), "booting");

    sweeper.runOnce().await().indefinitely();

    assertEquals(0, openSweeps(SourceTables.SMALL), "an instance registered just now");
    TimeTravel.registeredEarlier(booting, Duration.ofHours(1));
    Batch bootWork = api.claimBatch(booting, 5);
    sweeper.runOnce().await().indefinitely();
    assertEquals(0, openSweeps(SourceTables.SMALL), "its boot pass is open");
    api.complete(booting, bootWork, List.of()).expect(200);
    api.drain(booting, 5000);
    sweeper.runOnce().await().indefinitely();
    assertEquals(1, openSweeps(SourceTables.SMALL));
  }

  @Test
  void aSweepScansNoFasterThanItsRate() {
    Instance client = recovered(SourceTables.SMALL);
    sweeper.runOnce().await().indefinitely();
    // The sweep is 200 ms old by the database's clock: at 50 runs a second, 10 runs may be read.
    Db.update(
        "UPDATE rollcall.epochs SET created_at = now() - interval '200 milliseconds'"
            + " WHERE namespace = ? AND kind = 'sweep' AND state = 'open'",
        SourceTables.SMALL);

    Api.Reply first = api.claim(client, 5000).expect(200);

    assertEquals("batch", first.text("status"));
    Batch b = Api.batch(first.body().get("batch"));
    assertEquals("sweep", b.json().get("epochKind").asText());
    // The bound is the sweep's age when the range was cut, a little more than 200 ms under load.
    long ageMs =
        Db.number(
            "SELECT (extract(epoch FROM now() - created_at) * 1000)::bigint FROM rollcall.epochs"
                + " WHERE namespace = ? AND kind = 'sweep' AND state = 'open'",
            SourceTables.SMALL);
    assertTrue(
        b.runIds().size() >= 9 && b.runIds().size() <= 50 * ageMs / 1000 + 1,
        "runs: " + b.runIds().size() + " after " + ageMs + " ms");
    api.complete(client, b, List.of()).expect(200);
  }

  /** Claims a sweep to its end; the sweep is aged so that its rate bound does not pace the test. */
  Set<String> drain(Instance client) {
    Db.update(
        "UPDATE rollcall.epochs SET created_at = created_at - interval '1 hour'"
            + " WHERE kind = 'sweep' AND state = 'open'");
    Set<String> out = new HashSet<>();
    for (Batch b; (b = api.claimBatch(client, 5000)) != null; ) {
      assertEquals("sweep", b.json().get("epochKind").asText());
      out.addAll(b.runIds());
      api.complete(client, b, List.of()).expect(200);
    }
    assertNull(api.claimBatch(client, 5000));
    return out;
  }

  @Test
  void aSweepVisitsOnlyNamespacesWhereAnInstanceIsLiveOrABootPassIsOpen() {
    Instance live = api.register(SourceTables.SMALL, deploy, "sweep-live");
    api.heartbeat(live, List.of()).expect(200);
    Db.update(
        "UPDATE rollcall.instances SET lease_expires_at = now() - interval '1 second'"
            + " WHERE namespace = ? AND state = 'live'",
        SourceTables.BENCH);
    boolean bootOpen =
        Db.number(
                "SELECT count(*) FROM rollcall.epochs WHERE namespace = ? AND kind = 'boot'"
                    + " AND state = 'open'",
                SourceTables.BENCH)
            > 0;

    List<String> visits = sweeper.visits().await().indefinitely();

    assertTrue(visits.contains(SourceTables.SMALL), "an instance is live there: " + visits);
    assertEquals(
        bootOpen,
        visits.contains(SourceTables.BENCH),
        "no instance is live there: visited only to close its open boot pass: " + visits);
    api.leave(live).expect(204);
  }
}
