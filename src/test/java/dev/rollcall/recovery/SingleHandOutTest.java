package dev.rollcall.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import dev.rollcall.testing.TimeTravel;
import io.smallrye.mutiny.Uni;
import jakarta.inject.Inject;
import java.sql.Connection;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * A run that several dying instances reported, or that several takeovers deferred, is handed out
 * once: by the first epoch that decides it, while the others skip it ({@code handed-out-elsewhere})
 * or, when they decide at the same moment, defer it until they can see the first one's hand-out
 * ({@code hand-out-under-way}).
 */
@ServiceTest
class SingleHandOutTest extends ApiTestBase {

  static final String NS = SourceTables.ACTIVE;

  @Inject Reaper reaper;
  @Inject TakeoverRechecks rechecks;

  String deploy;
  String run;

  @BeforeEach
  void fresh() {
    deploy = UUID.randomUUID().toString();
    // A run of its own per test, quiet for an hour: the ledger and the batches are shared.
    run = "wrun_one_" + deploy;
    Db.update(
        "INSERT INTO "
            + SourceTables.table(NS)
            + " (id, workflow_name, status, updated_at)"
            + " VALUES (?, 'w', 'running', now() - interval '1 hour')",
        run);
  }

  @Test
  void twoInstancesThatReportedOneRunDieTogetherAndItIsHandedOutOnce() {
    List<Instance> dying = reporting(2, run);
    dying.forEach(TimeTravel::leaseExpired);

    reaper.runOnce().await().indefinitely();
    settleDeferrals();

    handedOutOnce(dying);
  }

  @Test
  void serviceReplicasReapingManyInstancesThatReportedOneRunHandItOutOnce() {
    List<Instance> dying = reporting(12, run);
    dying.forEach(TimeTravel::leaseExpired);

    Uni.join()
        .all(reaper.runOnce(), reaper.runOnce(), reaper.runOnce(), reaper.runOnce())
        .andFailFast()
        .await()
        .indefinitely();
    // A pass reaps a bounded number of instances: the next ones take the rest.
    for (int i = 0; i < 20 && alive(dying) > 0; i++) {
      reaper.runOnce().await().indefinitely();
    }
    assertEquals(0, alive(dying));
    settleDeferrals();

    handedOutOnce(dying);
  }

  private static long alive(List<Instance> instances) {
    return Db.number(
        "SELECT count(*) FROM rollcall.instances WHERE id::text = ANY(?::text[])"
            + " AND state <> 'dead'",
        ids(instances));
  }

  /**
   * The re-checks of takeovers that decided the run at the same moment as another, and deferred it
   * ({@code hand-out-under-way}): they find the other's batch.
   */
  private void settleDeferrals() {
    TimeTravel.deferredAnHourAgo(run);
    rechecks.runOnce().await().indefinitely();
  }

  /**
   * One takeover of {@code dying} handed the run out; each other one skipped it, perhaps after it
   * deferred it while the first decided it, and closed. (The ledger keeps one row per run, outcome
   * and reason between hand-outs: the skips are counted by the takeovers that closed.)
   */
  private void handedOutOnce(List<Instance> dying) {
    assertEquals(1, handOuts(dying, run), "batches of the takeovers holding the run");
    Set<String> outcomes = outcomes(dying, run);
    assertTrue(outcomes.contains("skipped:handed-out-elsewhere"), outcomes.toString());
    // A takeover decided before another instance was declared dead defers the run for it (an
    // instance whose lease ran out owns its runs until its death is declared).
    outcomes.removeAll(
        Set.of(
            "skipped:handed-out-elsewhere",
            "deferred:hand-out-under-way",
            "deferred:owned-by-live-instance"));
    assertEquals(Set.of(), outcomes);
    // Every other takeover settled the run without handing it out and closed; the one whose
    // batch holds it waits for that batch.
    assertEquals(
        1,
        Db.number(
            "SELECT count(*) FROM rollcall.epochs WHERE kind = 'takeover' AND state = 'open'"
                + " AND subject_instance_id::text = ANY(?::text[])",
            ids(dying)));
    assertEquals(
        0,
        Db.number(
            "SELECT count(*) FROM rollcall.deferred d JOIN rollcall.epochs e ON e.id = d.epoch_id"
                + " WHERE d.run_id = ? AND e.subject_instance_id::text = ANY(?::text[])",
            run,
            ids(dying)),
        "deferrals left after the re-check");
  }

  @Test
  void aRunAnotherTransactionIsDecidingIsDeferredNotLostAndHandedOutAtItsReCheck()
      throws Exception {
    List<Instance> dying = reporting(1, run);
    TimeTravel.leaseExpired(dying.get(0));

    // Another epoch's transaction holds the run's hand-out lock while the takeover opens, and
    // then hands nothing out.
    try (Connection other =
        Db.holding(
            "SELECT pg_advisory_xact_lock(" + SingleHandOut.CLASS_ID + ", hashtext(?))", run)) {
      reaper.runOnce().await().indefinitely();
      other.rollback();
    }
    assertEquals(0, handOuts(dying, run), "handed out while another epoch decided it");
    assertEquals(Set.of("deferred:hand-out-under-way"), outcomes(dying, run));

    TimeTravel.deferredAnHourAgo(run);
    rechecks.runOnce().await().indefinitely();

    assertEquals(1, handOuts(dying, run), "the deferred run is handed out at its re-check");
  }

  @Test
  void takeoversThatDeferredOneRunForALivePeerHandItOutOnceWhenThePeerLetsGo() {
    Instance peer = api.register(NS, deploy, "peer");
    api.heartbeat(peer, List.of(run)).expect(200);
    List<Instance> dying = reporting(3, run);
    dying.forEach(TimeTravel::leaseExpired);
    reaper.runOnce().await().indefinitely();
    assertEquals(0, handOuts(dying, run), "handed out while a live peer reports it");

    api.heartbeat(peer, List.of()).expect(200);
    TimeTravel.deferredAnHourAgo(run);
    rechecks.runOnce().await().indefinitely();

    assertEquals(1, handOuts(dying, run));
    assertEquals(
        Set.of("deferred:owned-by-live-instance", "skipped:handed-out-elsewhere"),
        outcomes(dying, run));
    api.leave(peer).expect(204);
  }

  /**
   * A takeover handed the run out (its batch served and completed after the new deploy's pass
   * opened); the pass, which finds the run unowned and quiet, leaves it to the takeover: its job
   * was queued after the pass read the queue.
   */
  @Test
  void aPassLeavesARunToTheTakeoverThatHandedItOutSinceThePassOpened() {
    List<Instance> dying = reporting(1, run);
    TimeTravel.leaseExpired(dying.get(0));
    reaper.runOnce().await().indefinitely();
    Instance booting = api.register(NS, "new-" + deploy, "booting");

    // The deploy's first claim opens its pass and is served the takeover's batch first.
    long times = api.drain(booting, 5000).stream().filter(b -> b.runIds().contains(run)).count();

    assertEquals(1, times, "batches holding the run");
    assertEquals(1, handOuts(dying, run));
    assertEquals(List.of("skipped:handed-out-elsewhere"), Passes.ledger("new-" + deploy, run));
    api.leave(booting).expect(204);
  }

  /**
   * An open takeover holds the run deferred (a live peer reported it, then let go); the pass's
   * first look leaves it to that takeover, whose re-check hands it out.
   */
  @Test
  void aPassLeavesARunAnOpenTakeoverHoldsDeferredToThatTakeover() {
    Instance peer = api.register(NS, deploy, "peer");
    api.heartbeat(peer, List.of(run)).expect(200);
    List<Instance> dying = reporting(1, run);
    TimeTravel.leaseExpired(dying.get(0));
    reaper.runOnce().await().indefinitely();
    api.heartbeat(peer, List.of()).expect(200);
    Instance booting = api.register(NS, "new-" + deploy, "booting");

    boolean byPass = api.drain(booting, 5000).stream().anyMatch(b -> b.runIds().contains(run));

    assertEquals(false, byPass, "the pass handed out a run a takeover holds deferred");
    assertEquals(List.of("skipped:handed-out-elsewhere"), Passes.ledger("new-" + deploy, run));
    TimeTravel.deferredAnHourAgo(run);
    rechecks.runOnce().await().indefinitely();
    assertEquals(1, handOuts(dying, run), "the takeover's re-check hands it out");
    api.leave(booting).expect(204);
    api.leave(peer).expect(204);
  }

  /** {@code n} new instances, each reporting {@code runId} in flight. */
  private List<Instance> reporting(int n, String runId) {
    List<Instance> out = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      Instance instance = api.register(NS, deploy, "reporter-" + i);
      api.heartbeat(instance, List.of(runId)).expect(200);
      out.add(instance);
    }
    return out;
  }

  /** How many batches of the takeovers of {@code instances} hold {@code runId}. */
  private static long handOuts(List<Instance> instances, String runId) {
    return Db.number(
        "SELECT count(*) FROM rollcall.batch_runs r JOIN rollcall.batches b ON b.id = r.batch_id"
            + " JOIN rollcall.epochs e ON e.id = b.epoch_id"
            + " WHERE r.run_id = ? AND e.kind = 'takeover' AND e.subject_instance_id::text"
            + " = ANY(?::text[])",
        runId,
        ids(instances));
  }

  /** The outcomes other than a hand-out the takeovers of {@code instances} wrote for the run. */
  private static Set<String> outcomes(List<Instance> instances, String runId) {
    return Db.set(
        "SELECT l.outcome || ':' || l.reason FROM rollcall.ledger l"
            + " JOIN rollcall.epochs e ON e.id = l.epoch_id"
            + " WHERE l.run_id = ? AND e.kind = 'takeover' AND e.subject_instance_id::text"
            + " = ANY(?::text[]) AND l.outcome IN ('skipped', 'deferred')",
        runId,
        ids(instances));
  }

  private static String ids(List<Instance> instances) {
    return "{" + String.join(",", instances.stream().map(i -> i.id().toString()).toList()) + "}";
  }
}
