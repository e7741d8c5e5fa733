package dev.rollcall.recovery;

import dev.rollcall.database.Databases;
import dev.rollcall.recovery.Verdict.Disposition;
import dev.rollcall.registry.BoundedMap;
import dev.rollcall.tracing.RecoveryTraces;
import io.opentelemetry.api.trace.Span;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.SqlClient;
import io.vertx.mutiny.sqlclient.Tuple;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.List;
import java.util.Optional;

/**
 * Joins each batch handed out to the trace of its pass: the pass's row carries the context of the
 * span that opened it ({@code epochs.trace_parent}), read once per pass by each service replica. A
 * claim that is not traced (tracing off) reads nothing.
 */
@ApplicationScoped
public class PassTraces {

  /** Passes whose trace context this replica remembers; a pass's context never changes. */
  private static final int REMEMBERED = 1024;

  private final Databases databases;
  private final RecoveryTraces traces;

  /** By namespace and epoch id ({@link ClosedEpochs#epoch}): ids are per database. */
  private final BoundedMap<String, Optional<String>> traceParents = new BoundedMap<>(REMEMBERED);

  PassTraces(Databases databases, RecoveryTraces traces) {
    this.databases = databases;
    this.traces = traces;
  }

  /**
   * Writes the hand-out of {@code result}'s batch, if it is one, into its pass's trace, linked to
   * {@code claim} (the claim's own span), a claim of an instance of {@code namespace}; answers
   * {@code result} unchanged.
   */
  public Uni<ClaimResult> handedOut(String namespace, ClaimResult result, Span claim) {
    if (!(result instanceof ClaimResult.Batch b) || !claim.getSpanContext().isValid()) {
      return Uni.createFrom().item(result);
    }
    LeasedBatch batch = b.batch();
    return Uni.createFrom()
        .deferred(() -> traceParent(databases.of(namespace).pool(), namespace, batch.epochId()))
        .invoke(traceParent -> traces.handedOut(traceParent.orElse(null), handOut(batch), claim))
        .replaceWith(result);
  }

  /** A leased batch as its spans describe it. */
  public static RecoveryTraces.HandOut handOut(LeasedBatch batch) {
    return new RecoveryTraces.HandOut(
        batch.epochId(),
        batch.epochKind().wire(),
        batch.id(),
        batch.fence(),
        batch.runs().stream().map(r -> r.reason().wire()).toList());
  }

  /**
   * Writes a re-check of {@code epoch}'s deferred runs ({@code rechecked} were due; {@code found}
   * is what it decided) into the pass's trace. Reads the pass's context on {@code client}, the
   * connection of the transaction that re-checks (once per pass per replica): a second connection
   * taken while a transaction holds one could wait for the pool forever when every connection is
   * held so.
   */
  public Uni<Void> rechecked(SqlClient client, Epoch epoch, int rechecked, List<Verdict> found) {
    return traceParent(client, epoch.namespace(), epoch.id())
        .invoke(
            traceParent ->
                traces.rechecked(
                    traceParent.orElse(null),
                    new RecoveryTraces.Recheck(
                        epoch.id(),
                        epoch.kind().wire(),
                        epoch.namespace(),
                        rechecked,
                        Verdicts.of(found, Disposition.HAND_OUT).size(),
                        Verdicts.of(found, Disposition.SKIP).size(),
                        Verdicts.of(found, Disposition.DEFER).size())))
        .replaceWithVoid();
  }

  private Uni<Optional<String>> traceParent(SqlClient client, String namespace, long epochId) {
    String key = ClosedEpochs.epoch(namespace, epochId);
    Optional<String> known = traceParents.get(key);
    if (known != null) {
      return Uni.createFrom().item(known);
    }
    return client
        .preparedQuery("SELECT trace_parent FROM rollcall.epochs WHERE id = $1")
        .execute(Tuple.of(epochId))
        .map(
            rows ->
                rows.size() == 0
                    ? Optional.<String>empty()
                    : Optional.ofNullable(rows.iterator().next().getString("trace_parent")))
        .invoke(found -> traceParents.put(key, found));
  }
}
