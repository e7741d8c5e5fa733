package dev.rollcall.recovery;

import dev.rollcall.concurrency.Gate;
import dev.rollcall.config.RollcallConfig;
import dev.rollcall.database.Databases;
import dev.rollcall.error.Problems.BatchNotFound;
import dev.rollcall.error.Problems.Forbidden;
import dev.rollcall.error.Problems.InvalidRequest;
import dev.rollcall.error.Problems.StaleFence;
import dev.rollcall.metrics.RecoveryMetrics;
import dev.rollcall.registry.Caller;
import dev.rollcall.registry.InstanceGuards;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Pool;
import io.vertx.mutiny.sqlclient.Row;
import io.vertx.mutiny.sqlclient.SqlClient;
import io.vertx.mutiny.sqlclient.Tuple;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import org.jboss.logging.Logger;

/**
 * Completes batches. A complete is accepted only from the batch's current holder under the current
 * fence; that single guard is what makes a re-leased batch's late complete harmless.
 */
@ApplicationScoped
public class CompletionService {

  private static final Logger LOG = Logger.getLogger(CompletionService.class);

  private final Databases databases;
  private final Epochs epochs;
  private final Batches batches;
  private final RollcallConfig config;
  private final RecoveryMetrics metrics;

  private final Gate gate;
  private final PassEvidence evidence;
  private final InstanceGuards guards;

  CompletionService(
      Databases databases,
      Epochs epochs,
      Batches batches,
      RollcallConfig config,
      RecoveryMetrics metrics,
      Gate gate,
      PassEvidence evidence,
      InstanceGuards guards) {
    this.guards = guards;
    this.gate = gate;
    this.evidence = evidence;
    this.databases = databases;
    this.epochs = epochs;
    this.batches = batches;
    this.config = config;
    this.metrics = metrics;
  }

  /** What a complete did. */
  public record Completion(
      long batchId, int enqueued, int failed, int retried, boolean alreadyCompleted) {}

  private record Held(
      long epochId,
      String state,
      int fence,
      UUID claimer,
      int attempts,
      int runCount,
      boolean scanDone) {}

  /** Completes a batch: its runs are enqueued, except {@code failedRunIds}, handed out again. */
  public Uni<Completion> complete(Caller caller, long batchId, int fence, List<String> failed) {
    Set<String> failedIds = new LinkedHashSet<>(failed);
    // Ahead of new claims: a complete releases what its batch holds and may close the epoch.
    return gate.<Completion>runAhead(() -> decide(caller, batchId, fence, failedIds))
        .onFailure(StaleFence.class)
        .invoke(e -> metrics.batch(caller.namespace(), "refused"));
  }

  /**
   * The complete commits in one transaction; closing the epoch, when its scan is done, takes the
   * epoch's lock in a second one. Taking that lock while the batch's row lock is still held would
   * order the two locks the other way round from a claim that closes a superseded epoch (epoch,
   * then its batches) and from a cut: PostgreSQL then kills one of them as a deadlock victim. A
   * retried complete tries the close again, so a close that failed after its complete committed is
   * not lost; a boot epoch's waiting claimers also close it when they look again.
   */
  private Uni<Completion> decide(Caller caller, long batchId, int fence, Set<String> failedIds) {
    // Batch ids are the caller's database's: the batch is looked for there alone.
    Pool pool = databases.of(caller.namespace()).pool();
    return pool.withTransaction(
            conn ->
                guards
                    .requireLive(conn, caller.instanceId())
                    .chain(() -> lockBatch(conn, caller, batchId))
                    .chain(held -> checkHolder(conn, caller, batchId, fence, held))
                    .chain(
                        held -> {
                          if ("completed".equals(held.state())) {
                            // A retried complete (the first answer was lost): same outcome, no
                            // change.
                            return Uni.createFrom()
                                .item(
                                    new Decided(
                                        new Completion(batchId, 0, 0, 0, true),
                                        held.epochId(),
                                        held.scanDone()));
                          }
                          return checkFailedIds(conn, batchId, failedIds)
                              .chain(() -> finish(conn, caller, batchId, held, failedIds))
                              .map(done -> new Decided(done, held.epochId(), held.scanDone()));
                        }))
        .call(
            decided ->
                decided.scanDone()
                    ? closeIfFinished(pool, caller.namespace(), decided.epochId())
                    : Uni.createFrom().voidItem())
        .map(Decided::completion);
  }

  /** A complete's outcome, and what its epoch's close needs to know once it has committed. */
  private record Decided(Completion completion, long epochId, boolean scanDone) {}

  private Uni<Held> lockBatch(SqlClient conn, Caller caller, long batchId) {
    return conn.preparedQuery(
            "SELECT b.epoch_id, b.state, b.fence, b.claimer_id, b.attempts, b.run_count,"
                + " e.scan_done"
                + " FROM rollcall.batches b JOIN rollcall.epochs e ON e.id = b.epoch_id"
                + " WHERE b.id = $1 AND e.namespace = $2 FOR UPDATE OF b")
        .execute(Tuple.of(batchId, caller.namespace()))
        .map(
            rows -> {
              if (rows.size() == 0) {
                throw new BatchNotFound(batchId);
              }
              Row r = rows.iterator().next();
              return new Held(
                  r.getLong("epoch_id"),
                  r.getString("state"),
                  r.getInteger("fence"),
                  r.getUUID("claimer_id"),
                  r.getInteger("attempts"),
                  r.getInteger("run_count"),
                  r.getBoolean("scan_done"));
            });
  }

  /**
   * The current holder with the current fence passes. A caller that held this batch under an older
   * fence gets {@code 409}: the batch was re-leased. Anyone else gets {@code 403}.
   */
  private Uni<Held> checkHolder(SqlClient conn, Caller caller, long batchId, int fence, Held held) {
    if (caller.instanceId().equals(held.claimer())) {
      if (fence == held.fence()) {
        return Uni.createFrom().item(held);
      }
      throw new StaleFence(batchId, fence, held.fence());
    }
    // An earlier holder's hand-outs were written when its lease expired (or the batch was given
    // up): it held the batch under an older fence.
    return conn.preparedQuery(
            "SELECT 1 FROM rollcall.ledger WHERE batch_id = $1 AND instance_id = $2 LIMIT 1")
        .execute(Tuple.of(batchId, caller.instanceId()))
        .map(
            rows -> {
              if (rows.size() == 0) {
                throw new Forbidden("batch " + batchId + " was never leased to this instance");
              }
              throw new StaleFence(batchId, fence, held.fence());
            });
  }

  private Uni<Void> checkFailedIds(SqlClient conn, long batchId, Set<String> failedIds) {
    if (failedIds.isEmpty()) {
      return Uni.createFrom().voidItem();
    }
    return conn.preparedQuery(
            "SELECT f.run_id FROM unnest($2::text[]) AS f(run_id) WHERE NOT EXISTS"
                + " (SELECT 1 FROM rollcall.batch_runs r WHERE r.batch_id = $1"
                + " AND r.run_id = f.run_id) LIMIT 10")
        .execute(Tuple.of(batchId, failedIds.toArray(String[]::new)))
        .map(
            rows -> {
              if (rows.size() > 0) {
                List<String> unknown = new ArrayList<>();
                rows.forEach(r -> unknown.add(r.getString("run_id")));
                throw new InvalidRequest(
                    "failedRunIds names runs that are not in batch " + batchId + ": " + unknown);
              }
              return null;
            });
  }

  private Uni<Completion> finish(
      SqlClient conn, Caller caller, long batchId, Held held, Set<String> failedIds) {
    String[] failed = failedIds.toArray(String[]::new);
    boolean retry =
        handsOutAgain(held.state(), failed.length, held.attempts(), config.batch().maxAttempts());
    return batches
        .complete(conn, batchId, held.fence())
        .chain(
            () ->
                // Each hand-out's row, written once with its outcome.
                conn.preparedQuery(Ledger.OUTCOMES)
                    .execute(Tuple.of(batchId, held.fence(), failed, "failed", "enqueued")))
        .chain(
            () ->
                retry
                    ? batches.retry(conn, held.epochId(), batchId, held.attempts(), failed)
                    : Uni.createFrom().voidItem())
        .map(
            ignored -> {
              int n = failed.length;
              LOG.debugf(
                  "batch %d completed by instance %s under fence %d (%d failed)",
                  batchId, caller.instanceId(), held.fence(), n);
              if (n > 0 && !retry) {
                LOG.warnf(
                    "batch %d: %d failed runs are not handed out again (%d hand-outs reached)",
                    batchId, n, held.attempts());
              }
              return new Completion(batchId, held.runCount() - n, n, retry ? n : 0, false);
            });
  }

  /**
   * Whether a complete's failed runs go into a new batch of the pass. Only while the batch is still
   * leased: a batch given up ({@code abandoned}) belongs to a pass that was closed, or reached its
   * last hand-out, and a closed pass hands nothing out again (its runs are left to the next pass or
   * a sweep). A batch's runs are handed out at most {@code maxAttempts} times.
   */
  static boolean handsOutAgain(String batchState, int failed, int attempts, int maxAttempts) {
    return failed > 0 && "leased".equals(batchState) && attempts < maxAttempts;
  }

  /**
   * After the complete committed: while the pass still has other work outstanding ({@link
   * Epochs#finished}, under a share lock of the epoch's row that other completes' checks do not
   * wait for), the complete answers at once; a pass's last completes no longer queue one behind
   * another for the epoch's lock, each answer held up by the closes tried before it. Otherwise, in
   * a transaction of its own, it takes the epoch lock first, so the check sees every batch
   * committed before it (this complete's included). Once the close has committed (and with it the
   * notice that wakes the deploy's waiting claims), the pass's evidence is deleted in a third
   * transaction that the complete's answer does not wait for: a client learns its pass is over from
   * that answer too.
   */
  private Uni<Void> closeIfFinished(Pool pool, String namespace, long epochId) {
    return pool.withTransaction(conn -> epochs.finished(conn, epochId))
        .chain(
            finished ->
                finished ? lockAndClose(pool, namespace, epochId) : Uni.createFrom().voidItem());
  }

  private Uni<Void> lockAndClose(Pool pool, String namespace, long epochId) {
    return pool.withTransaction(
            conn ->
                epochs
                    .lock(conn, epochId)
                    .chain(
                        epoch ->
                            epoch.open()
                                ? epochs.closeIfFinished(conn, epochId)
                                : Uni.createFrom().item(false)))
        .invoke(
            closed -> {
              if (closed) {
                evidence.forgetLater(namespace, epochId);
              }
            })
        .replaceWithVoid();
  }
}
