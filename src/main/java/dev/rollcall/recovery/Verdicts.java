package dev.rollcall.recovery;

import dev.rollcall.metrics.RecoveryMetrics;
import dev.rollcall.recovery.Verdict.Disposition;
import dev.rollcall.source.RunSource;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.SqlClient;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;

/**
 * What a claim does with the verdicts on its runs, whether a range's first look or a re-check of
 * deferred runs gave them: mends the torn writes of the runs it hands out, and writes the others
 * (deferrals, and skips to the ledger).
 */
@ApplicationScoped
class Verdicts {

  private final Deferrals deferrals;
  private final Ledger ledger;
  private final TornRuns tornRuns;
  private final RecoveryMetrics metrics;

  Verdicts(Deferrals deferrals, Ledger ledger, TornRuns tornRuns, RecoveryMetrics metrics) {
    this.deferrals = deferrals;
    this.ledger = ledger;
    this.tornRuns = tornRuns;
    this.metrics = metrics;
  }

  /** The runs a pass hands out, their torn writes mended before the batch is visible. */
  Uni<?> mendTorn(SqlClient conn, RunSource source, Epoch epoch, List<Verdict> verdicts) {
    return tornRuns.pass(conn, source, epoch.id(), verdicts);
  }

  /** Writes a page's verdicts that are not hand-outs: deferrals and skips, to the ledger. */
  Uni<Void> record(SqlClient conn, Epoch epoch, List<Verdict> verdicts) {
    count(epoch.namespace(), "deferred", of(verdicts, Disposition.DEFER));
    count(epoch.namespace(), "skipped", of(verdicts, Disposition.SKIP));
    return deferrals
        .defer(conn, epoch, of(verdicts, Disposition.DEFER))
        .chain(() -> ledger.record(conn, epoch, of(verdicts, Disposition.SKIP), "skipped", null));
  }

  private void count(String namespace, String verdict, List<Verdict> verdicts) {
    verdicts.stream()
        .collect(Collectors.groupingBy(v -> v.reason().wire(), Collectors.counting()))
        .forEach((reason, n) -> metrics.runs(namespace, verdict, reason, n));
  }

  /**
   * One hand-out of a run across epochs ({@link SingleHandOut}): of {@code verdicts}' hand-outs, a
   * run another transaction is deciding right now ({@code underWay}) is deferred, {@code
   * hand-out-under-way}, keeping the queue message it was to be re-driven with; a run another epoch
   * answers for ({@code elsewhere}) becomes a skip, {@code handed-out-elsewhere}; every other
   * verdict stays.
   */
  static List<Verdict> singleHandOut(
      List<Verdict> verdicts, Set<String> underWay, Set<String> elsewhere) {
    return verdicts.stream()
        .map(
            v -> {
              if (v.disposition() != Disposition.HAND_OUT) {
                return v;
              }
              if (underWay.contains(v.runId())) {
                return new Verdict(
                    v.runId(),
                    v.workflowName(),
                    Reason.HAND_OUT_UNDER_WAY,
                    Disposition.DEFER,
                    null,
                    v.messageId());
              }
              return elsewhere.contains(v.runId())
                  ? Verdict.skip(v.runId(), v.workflowName(), Reason.HANDED_OUT_ELSEWHERE)
                  : v;
            })
        .toList();
  }

  static List<Verdict> of(List<Verdict> verdicts, Disposition disposition) {
    return verdicts.stream().filter(v -> v.disposition() == disposition).toList();
  }

  /** The runs to hand out, each with the queue its workflow is enqueued on. */
  static List<HandedOutRun> handedOut(RunSource source, List<Verdict> runs) {
    List<HandedOutRun> handed = new ArrayList<>(runs.size());
    for (Verdict v : runs) {
      handed.add(
          new HandedOutRun(
              v.runId(),
              v.workflowName(),
              source.queueName(v.workflowName()),
              v.reason(),
              v.deadInstanceId(),
              v.messageId()));
    }
    return handed;
  }
}
