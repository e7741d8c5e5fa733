package dev.rollcall.recovery;

import dev.rollcall.database.Databases;
import dev.rollcall.source.WakeJobs;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.SqlClient;
import io.vertx.mutiny.sqlclient.SqlConnection;
import io.vertx.mutiny.sqlclient.Transaction;
import jakarta.inject.Singleton;
import org.jboss.logging.Logger;

/**
 * Deletes a closed pass's queue evidence ({@link WakeJobs#forget}) in a transaction of its own that
 * no one waits for, once the close has committed: the close, and with it the notice that the pass
 * is over, does not wait for the delete (tens of thousands of rows for a large pass). Deleted
 * before the close committed, a close that then rolled back would leave an open pass without its
 * evidence. Should the delete fail, or the service stop first, retention deletes the evidence with
 * the epoch.
 */
@Singleton
class PassEvidence {

  private static final Logger LOG = Logger.getLogger(PassEvidence.class);

  private final Databases databases;

  PassEvidence(Databases databases) {
    this.databases = databases;
  }

  /**
   * The close of pass {@code epochId} of {@code namespace} has committed: its evidence goes now, in
   * the namespace's database, without the caller waiting.
   */
  void forgetLater(String namespace, long epochId) {
    Uni.createFrom()
        .deferred(
            () ->
                databases
                    .of(namespace)
                    .pool()
                    .withTransaction(conn -> WakeJobs.forget(conn, epochId)))
        .subscribe()
        .with(
            ignored -> {},
            e ->
                LOG.warnf(
                    "epoch %d closed; its queue evidence is left to retention (%s)",
                    epochId, e.toString()));
  }

  /**
   * The pass was closed in the transaction {@code conn} is in: its evidence goes once that
   * transaction commits, and stays if it rolls back.
   */
  void forgetOnceCommitted(SqlClient conn, String namespace, long epochId) {
    Transaction tx = conn instanceof SqlConnection c ? c.transaction() : null;
    // Outside a transaction the close committed with its statement.
    Uni<Void> committed = tx == null ? Uni.createFrom().voidItem() : tx.completion();
    committed.subscribe().with(ignored -> forgetLater(namespace, epochId), rolledBack -> {});
  }
}
