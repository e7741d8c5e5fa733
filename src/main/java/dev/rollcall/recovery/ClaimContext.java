package dev.rollcall.recovery;

import dev.rollcall.database.Database;
import dev.rollcall.error.DomainException;
import dev.rollcall.error.Problems.SourceUnavailable;
import dev.rollcall.registry.Caller;
import dev.rollcall.source.RunSource;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Pool;
import java.util.UUID;

/**
 * One claim's context, the same in every stage it passes: the instance that asks, its namespace's
 * source, and its limits: the most runs it may be handed ({@code maxRuns}, also the size of a page
 * it cuts), and how long what it is handed is leased to it ({@code leaseMs}).
 */
record ClaimContext(Caller caller, RunSource source, Database db, int maxRuns, long leaseMs) {

  /** The pool of the namespace's database: every transaction of the claim runs on it. */
  Pool pool() {
    return db.pool();
  }

  UUID instanceId() {
    return caller.instanceId();
  }

  String namespace() {
    return caller.namespace();
  }

  /** A batch or range leased to the caller for the batch lease. */
  Batches.Lease lease() {
    return new Batches.Lease(caller.instanceId(), leaseMs);
  }

  /** A failure to read the source is the source's problem (503), not an internal error. */
  <T> Uni<T> fromSource(Uni<T> read) {
    return read.onFailure(e -> !(e instanceof DomainException))
        .transform(e -> new SourceUnavailable(source.namespace(), e.getMessage()));
  }
}
