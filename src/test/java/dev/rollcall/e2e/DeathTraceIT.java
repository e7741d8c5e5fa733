package dev.rollcall.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.rollcall.bench.Latencies;
import dev.rollcall.e2e.EndToEndIT.Cluster;
import dev.rollcall.e2e.EndToEndIT.Round;
import dev.rollcall.e2e.EndToEndIT.Settings;
import dev.rollcall.testing.OtlpReceiver;
import dev.rollcall.testing.Poll;
import dev.rollcall.testing.SpanTree;
import dev.rollcall.testing.TestDatabase;
import dev.rollcall.testing.TraceSpan;
import dev.rollcall.tracing.RecoveryTraces;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * A kill -9 on the real Workflow SDK runtime is one trace, exported over OTLP/HTTP by a packaged
 * service replica: the example app of {@code e2e/app} as three replicas, one Rollcall replica with
 * tracing on, exporting to an in-test receiver ({@link OtlpReceiver}). A round of runs is started,
 * the replica executing the most steps is killed with SIGKILL, and once its runs completed and its
 * takeover closed, the takeover's trace must hold, linked by parent ids: the death with its
 * evidence and declaration, the takeover's open, its queue-lock release (how many), each batch it
 * handed out (linked to the claim that took it) and its close. Prints the trace's span tree. Takes
 * {@link EndToEndIT}'s properties ({@code e2e.runs}, {@code e2e.step-ms}, ...).
 */
@Tag("e2e")
class DeathTraceIT {

  static final String NAMESPACE = RollcallServices.NAMESPACE;

  @Test
  void aKilledReplicasRecoveryIsOneTraceFromDeathToTakeoverClose() throws Exception {
    Settings s = Settings.fromProperties();
    ExampleApp.prepare(s.line());
    try (TestDatabase db = TestDatabase.start();
        OtlpReceiver receiver = OtlpReceiver.start()) {
      ExampleApp.bootstrap(s.line(), db);
      Map<String, String> tracing = new HashMap<>(receiver.serviceSettings());
      // Batches of spans leave every 200 ms rather than every 5 s: the test waits for the close.
      tracing.put("quarkus.otel.bsp.schedule.delay", "PT0.2S");
      try (RollcallServices services = RollcallServices.start(db, 1, tracing)) {
        Cluster cluster = new Cluster(db, services.appEnv(s.recovery(), s.targetWorld()), s, "tr");
        try {
          cluster.fillUp(3);
          cluster.awaitSessionProofArmed();
          Round round = cluster.round(0);
          round.stop(true);
          round.measure(s.deadlineS());
          assertEquals(0, round.unfinished, "runs of the round left unfinished");
          String victim =
              db.column(
                      "SELECT id::text FROM rollcall.instances WHERE name = ? AND namespace = ?",
                      round.victim.name(),
                      NAMESPACE)
                  .get(0);
          long epoch = closedTakeoverOf(db, victim);
          List<TraceSpan> trace = traceOfClose(receiver, epoch);
          System.out.printf(
              "%nThe trace of the kill -9 of %s (instance %s, takeover %d; load %s; %s):%n%s%n",
              round.victim.name(),
              victim,
              epoch,
              Latencies.loadAverage(),
              receiver.describe(),
              SpanTree.render(trace));
          TakeoverTrace.check(trace, victim, epoch);
        } finally {
          cluster.close();
        }
      }
    }
  }

  /** The victim's takeover, once closed. */
  private static long closedTakeoverOf(TestDatabase db, String victim) {
    return Poll.value(
        "the takeover of " + victim + " closed",
        Duration.ofSeconds(120),
        () ->
            db
                .column(
                    "SELECT id::text FROM rollcall.epochs WHERE kind = 'takeover'"
                        + " AND subject_instance_id = ?::uuid AND state = 'closed'",
                    victim)
                .stream()
                .findFirst()
                .map(Long::parseLong));
  }

  /** Every span received in the trace of the takeover's close, once the close arrived. */
  private static List<TraceSpan> traceOfClose(OtlpReceiver receiver, long epoch) {
    TraceSpan close =
        Poll.value(
            "the close span of takeover " + epoch,
            Duration.ofSeconds(30),
            () ->
                TakeoverTrace.find(
                    receiver.spans(),
                    RecoveryTraces.closed("takeover"),
                    RecoveryTraces.EPOCH.getKey(),
                    String.valueOf(epoch)));
    return receiver.spans().stream().filter(x -> x.traceId().equals(close.traceId())).toList();
  }
}
