package dev.rollcall.tracing;

import static dev.rollcall.tracing.RecoveryTraces.BATCH;
import static dev.rollcall.tracing.RecoveryTraces.CLOSE_REASON;
import static dev.rollcall.tracing.RecoveryTraces.EPOCH;
import static dev.rollcall.tracing.RecoveryTraces.FENCE;
import static dev.rollcall.tracing.RecoveryTraces.INSTANCE;
import static dev.rollcall.tracing.RecoveryTraces.LEASE_EXPIRED_AT;
import static dev.rollcall.tracing.RecoveryTraces.LOCKS;
import static dev.rollcall.tracing.RecoveryTraces.PROOF;
import static dev.rollcall.tracing.RecoveryTraces.REASONS;
import static dev.rollcall.tracing.RecoveryTraces.RUNS;
import static dev.rollcall.tracing.RecoveryTraces.WORKERS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.recovery.Reaper;
import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Batch;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.Poll;
import dev.rollcall.testing.QueueJobs;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import dev.rollcall.testing.SpanTree;
import dev.rollcall.testing.TimeTravel;
import dev.rollcall.testing.TraceSpan;
import dev.rollcall.testing.TracingOn;
import io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.quarkus.test.junit.TestProfile;
import jakarta.inject.Inject;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.stream.Collectors;
import org.jboss.logging.Logger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * A death is one trace: its evidence, the declaration, the takeover it opened, the queue locks that
 * takeover released, each batch handed out (linked to the claim that took it, in the claimer's own
 * trace) and the takeover's close, which happens later, in another request.
 */
@ServiceTest
@TestProfile(TracingOn.class)
class DeathTraceTest extends ApiTestBase {

  private static final Logger LOG = Logger.getLogger(DeathTraceTest.class);

  @Inject Reaper reaper;
  @Inject InMemorySpanExporter exporter;

  // Each test's names are its own; its death is found by its instance's id, so instances other
  // tests left behind may be reaped in the same pass.
  final String tag = UUID.randomUUID().toString().substring(0, 8);
  final QueueJobs queue = new QueueJobs();

  @AfterEach
  void dropJobs() {
    queue.deleteAll();
  }

  @Test
  void aDeathIsOneTraceFromItsEvidenceToItsTakeoversClose() {
    String deploy = "trace-" + tag;
    Instance peer = api.register(SourceTables.SMALL, deploy, "peer");
    api.drain(peer, 100);
    Instance victim = api.register(SourceTables.SMALL, "next-" + deploy, "victim");
    List<String> inFlight = Db.activeRuns(SourceTables.SMALL).stream().sorted().limit(3).toList();
    api.heartbeat(victim, inFlight).expect(200);
    TimeTravel.leaseExpired(victim);

    reaper.runOnce().await().indefinitely();
    long epoch = takeoverOf(victim);
    Batch taken = claimBatchOf(peer, epoch);
    api.complete(peer, taken, List.of()).expect(200);

    SpanData death = deathOf(victim);
    SpanData open = child(death, RecoveryTraces.opened("takeover"));
    SpanData close = child(open, RecoveryTraces.closed("takeover"));
    List<SpanData> trace = trace(death);
    LOG.infof("the takeover trace of instance %s:%n%s", victim.id(), tree(trace));

    assertEquals("lease-expired", death.getAttributes().get(PROOF));
    SpanData evidence = child(death, RecoveryTraces.EVIDENCE);
    assertEquals("lease-expired", evidence.getAttributes().get(PROOF));
    assertNotNull(evidence.getAttributes().get(LEASE_EXPIRED_AT));
    SpanData declared = child(death, RecoveryTraces.DECLARED_DEAD);
    assertEquals(victim.id().toString(), declared.getAttributes().get(INSTANCE));
    assertTrue(
        declared.getEndEpochNanos() >= open.getEndEpochNanos(),
        "the declaration commits with its takeover");
    assertEquals(epoch, open.getAttributes().get(EPOCH));
    assertEquals(3L, open.getAttributes().get(RUNS));
    assertEquals(1L, open.getAttributes().get(RecoveryTraces.BATCHES));
    assertEquals(0L, open.getAttributes().get(RecoveryTraces.DEFERRED));
    // A namespace without a queue: the release found no lock to release.
    assertEquals(0L, child(open, RecoveryTraces.LOCKS_RELEASED).getAttributes().get(LOCKS));

    SpanData handOut = child(open, RecoveryTraces.handedOut("takeover"));
    assertEquals(taken.id(), handOut.getAttributes().get(BATCH));
    assertEquals((long) taken.fence(), handOut.getAttributes().get(FENCE));
    assertEquals(3L, handOut.getAttributes().get(RUNS));
    assertEquals(List.of("owner-dead=3"), handOut.getAttributes().get(REASONS));
    // Linked to the claim that took the batch, a span of the claimer's request trace.
    assertEquals(1, handOut.getLinks().size());
    SpanData claim = spanWithId(handOut.getLinks().get(0).getSpanContext().getSpanId());
    assertEquals(RecoveryTraces.CLAIM, claim.getName());
    assertEquals(taken.id(), claim.getAttributes().get(BATCH));
    assertEquals(List.of("owner-dead=3"), claim.getAttributes().get(REASONS));
    assertTrue(!claim.getTraceId().equals(death.getTraceId()), "the claim has its own trace");
    assertTrue(claim.getParentSpanContext().isValid(), "a child of the claim's HTTP request");
    // The victim's life before its death: its registration, and its heartbeat's flush.
    SpanData registered =
        spans().stream()
            .filter(s -> s.getName().equals(RecoveryTraces.REGISTER))
            .filter(s -> victim.id().toString().equals(s.getAttributes().get(INSTANCE)))
            .findFirst()
            .orElseThrow();
    assertEquals("next-" + deploy, registered.getAttributes().get(RecoveryTraces.DEPLOYMENT));
    assertTrue(
        spans().stream()
            .anyMatch(
                s ->
                    s.getName().equals(RecoveryTraces.HEARTBEAT_FLUSH)
                        && orZero(s.getAttributes().get(RecoveryTraces.BEATS)) >= 1));
    // The complete's span ends as its response is written: it may finish just after the reply.
    Poll.value(
        "the complete span of batch " + taken.id(),
        Duration.ofSeconds(10),
        () ->
            spans().stream()
                .filter(s -> taken.id() == orZero(s.getAttributes().get(BATCH)))
                .filter(s -> s.getName().equals(RecoveryTraces.COMPLETE))
                .findFirst());
    assertEquals("completed", close.getAttributes().get(CLOSE_REASON));
    assertEquals(
        Set.of(
            RecoveryTraces.DEATH,
            RecoveryTraces.EVIDENCE,
            RecoveryTraces.DECLARED_DEAD,
            "rollcall.takeover.open",
            RecoveryTraces.LOCKS_RELEASED,
            "rollcall.takeover.hand-out",
            "rollcall.takeover.close"),
        trace.stream().map(SpanData::getName).collect(Collectors.toSet()));
    assertEquals(7, trace.size(), tree(trace));
    api.leave(peer).expect(204);
  }

  @Test
  void aTakeoversReCheckOfTheRunItDeferredIsASpanOfTheDeathsTrace() {
    String deploy = "recheck-" + tag;
    Instance peer = api.register(SourceTables.SMALL, deploy, "peer");
    api.drain(peer, 100);
    Instance victim = api.register(SourceTables.SMALL, "next-" + deploy, "victim");
    List<String> inFlight = Db.activeRuns(SourceTables.SMALL).stream().sorted().limit(2).toList();
    api.heartbeat(victim, inFlight).expect(200);
    // A live peer reports the first run too: the takeover defers it.
    api.heartbeat(peer, inFlight.subList(0, 1)).expect(200);
    TimeTravel.leaseExpired(victim);

    reaper.runOnce().await().indefinitely();
    long epoch = takeoverOf(victim);
    api.complete(peer, claimBatchOf(peer, epoch), List.of()).expect(200);
    // The peer no longer reports it, and its re-check is due: the next claim re-drives it.
    api.heartbeat(peer, List.of()).expect(200);
    TimeTravel.deferredAnHourAgo(inFlight.get(0));
    Batch rechecked = claimBatchOf(peer, epoch);
    api.complete(peer, rechecked, List.of()).expect(200);

    SpanData death = deathOf(victim);
    SpanData open = child(death, RecoveryTraces.opened("takeover"));
    SpanData recheck = child(open, RecoveryTraces.rechecked("takeover"));
    LOG.infof("the takeover trace of instance %s:%n%s", victim.id(), tree(trace(death)));
    assertEquals(List.of(inFlight.get(0)), rechecked.runIds());
    assertEquals(1L, open.getAttributes().get(RecoveryTraces.DEFERRED));
    assertEquals(epoch, recheck.getAttributes().get(EPOCH));
    assertEquals(1L, recheck.getAttributes().get(RecoveryTraces.RECHECKED));
    assertEquals(1L, recheck.getAttributes().get(RUNS));
    assertEquals(0L, recheck.getAttributes().get(RecoveryTraces.SKIPPED));
    assertEquals(0L, recheck.getAttributes().get(RecoveryTraces.DEFERRED));
    // The declaration counts the instance's queue workers rather than naming each.
    SpanData declared = child(death, RecoveryTraces.DECLARED_DEAD);
    assertEquals(0L, declared.getAttributes().get(RecoveryTraces.WORKER_COUNT));
    assertEquals(null, declared.getAttributes().get(WORKERS));
    api.leave(peer).expect(204);
  }

  @Test
  void aTakeoversLockReleaseSaysHowManyAndHowEachWorkerWasKnown() {
    String deploy = "locks-" + tag;
    String named = "wn_" + tag;
    String learned = "wl_" + tag;
    Instance peer = api.register(SourceTables.ENGINE, deploy, "peer");
    Instance victim = api.register(SourceTables.ENGINE, deploy, "victim", List.of(named));
    job("run_n_" + tag, "msg_n_" + tag, named);
    job("run_l_" + tag, "msg_l_" + tag, learned);
    // The heartbeat that reports the message teaches Rollcall the worker holding its job.
    api.heartbeatEntries(victim, List.of(Api.execution("run_l_" + tag, "msg_l_" + tag)))
        .expect(200);
    TimeTravel.leaseExpired(victim);

    reaper.runOnce().await().indefinitely();

    SpanData open = child(deathOf(victim), RecoveryTraces.opened("takeover"));
    SpanData locks = child(open, RecoveryTraces.LOCKS_RELEASED);
    LOG.infof("the takeover trace of instance %s:%n%s", victim.id(), tree(trace(open)));
    assertEquals(2L, locks.getAttributes().get(LOCKS));
    assertEquals(
        Set.of(named + " named", learned + " learned"),
        Set.copyOf(locks.getAttributes().get(WORKERS)));
    api.leave(peer).expect(204);
  }

  // ---------------------------------------------------------------------------------------------

  /** A job of the engine's flows locked by {@code worker} now, keyed by its message. */
  void job(String runId, String messageId, String worker) {
    queue.add("workflow_flows", messageId, messageId, runId, worker, 0);
  }

  static long takeoverOf(Instance victim) {
    return Db.number(
        "SELECT id FROM rollcall.epochs WHERE kind = 'takeover' AND subject_instance_id = ?",
        victim.id());
  }

  /** Claims (and completes every other batch) until the batch of {@code epoch} comes. */
  Batch claimBatchOf(Instance claimer, long epoch) {
    for (int i = 0; i < 20; i++) {
      Batch b = api.claimBatch(claimer, 100);
      if (b.epochId() == epoch) {
        return b;
      }
      api.complete(claimer, b, List.of()).expect(200);
    }
    throw new AssertionError("no batch of epoch " + epoch + " in 20 claims");
  }

  List<SpanData> spans() {
    return exporter.getFinishedSpanItems();
  }

  SpanData deathOf(Instance victim) {
    return Poll.value(
        "the death span of " + victim.id(),
        Duration.ofSeconds(10),
        () ->
            spans().stream()
                .filter(s -> s.getName().equals(RecoveryTraces.DEATH))
                .filter(s -> victim.id().toString().equals(s.getAttributes().get(INSTANCE)))
                .findFirst());
  }

  /** The one child of {@code parent} named {@code name}, once exported. */
  SpanData child(SpanData parent, String name) {
    return Poll.value(
        name + " under " + parent.getName(),
        Duration.ofSeconds(10),
        () -> {
          List<SpanData> found =
              spans().stream()
                  .filter(s -> s.getName().equals(name))
                  .filter(s -> s.getParentSpanId().equals(parent.getSpanId()))
                  .toList();
          assertTrue(found.size() <= 1, found.toString());
          return found.stream().findFirst();
        });
  }

  SpanData spanWithId(String spanId) {
    return Poll.value(
        "span " + spanId,
        Duration.ofSeconds(10),
        () -> spans().stream().filter(s -> s.getSpanId().equals(spanId)).findFirst());
  }

  List<SpanData> trace(SpanData member) {
    return spans().stream().filter(s -> s.getTraceId().equals(member.getTraceId())).toList();
  }

  static long orZero(Long value) {
    return value == null ? 0 : value;
  }

  /** The trace as an indented tree (SpanTree). */
  static String tree(List<SpanData> trace) {
    return SpanTree.render(trace.stream().map(TraceSpan::of).toList());
  }
}
