package dev.rollcall.recovery;

import dev.rollcall.config.Intervals;
import dev.rollcall.config.RollcallConfig;
import dev.rollcall.database.Database;
import dev.rollcall.database.Databases;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import io.quarkus.scheduler.Scheduled;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Pool;
import io.vertx.mutiny.sqlclient.Tuple;
import jakarta.enterprise.context.ApplicationScoped;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Supplier;
import org.jboss.logging.Logger;

/**
 * Deletes what only grows: epochs closed longer ago than {@code rollcall.retention.age} with their
 * batches, batch runs, counts and ledger rows, and instances that ended longer ago than that and
 * that nothing refers to any more. Nothing an open epoch or a live instance needs is touched.
 *
 * <p>One pass at a time across every service replica: a pass first wins a guarded update of its
 * housekeeping row (its lease, by the database's clock). Deletes are chunked ({@code chunk-size}
 * rows per statement, each its own transaction, so no lock is held for long) and a pass stops
 * starting new ones after {@code max-pass-time}; the next pass carries on. Rows deleted per table
 * and the pass duration are metrics ({@code rollcall_retention_deleted_total}, {@code
 * rollcall_retention_pass_seconds}).
 */
@ApplicationScoped
public class Retention {

  private static final Logger LOG = Logger.getLogger(Retention.class);

  private final Databases databases;
  private final RollcallConfig config;
  private final MeterRegistry meters;

  Retention(Databases databases, RollcallConfig config, MeterRegistry meters) {
    this.databases = databases;
    this.config = config;
    this.meters = meters;
  }

  /** What one pass did: whether it ran (another replica may hold the lease) and rows by table. */
  public record Pass(boolean ran, Map<String, Long> deleted, boolean finished) {
    /** Rows deleted in all tables. */
    public long total() {
      return deleted.values().stream().mapToLong(Long::longValue).sum();
    }

    /** Two passes (in two databases) as one: ran if either ran, finished if both did. */
    Pass and(Pass other) {
      Map<String, Long> sum = new LinkedHashMap<>(deleted);
      other.deleted.forEach((table, n) -> sum.merge(table, n, Long::sum));
      return new Pass(ran || other.ran, sum, finished && other.finished);
    }
  }

  @Scheduled(
      identity = "rollcall-retention",
      every = "${rollcall.retention.interval:1m}",
      concurrentExecution = Scheduled.ConcurrentExecution.SKIP)
  Uni<Void> scheduled() {
    // Every database at once, each with its own turn and its own failures.
    return Housekeeping.inEach(databases, this::runOnce, "retention pass");
  }

  /** One pass in each database where this replica wins the lease. Tests call it directly. */
  public Uni<Pass> runOnce() {
    return databases
        .inTurn(this::runOnce)
        .map(passes -> passes.stream().reduce(Pass::and).orElse(new Pass(false, Map.of(), true)));
  }

  /** One pass in one database, if this replica wins its lease there. */
  public Uni<Pass> runOnce(Database db) {
    long leaseMs = config.retention().maxPassTime().toMillis() + 60_000;
    Pool pool = db.pool();
    return Housekeeping.takeTurn(pool, "retention", leaseMs)
        .chain(
            won -> {
              if (!won) {
                return Uni.createFrom().item(new Pass(false, Map.of(), false));
              }
              Timer.Sample sample = Timer.start(meters);
              Work work = new Work(pool, config.retention().maxPassTime());
              return work.run()
                  .eventually(
                      () -> {
                        sample.stop(meters.timer("rollcall.retention.pass"));
                        // Another replica's schedule may start the next pass after half an
                        // interval: about one pass per interval for the whole cluster.
                        return pool.preparedQuery(
                                "UPDATE rollcall.housekeeping SET last_pass = now(),"
                                    + " lease_until = now() + $1::bigint * interval"
                                    + " '1 millisecond' WHERE job = 'retention'")
                            .execute(Tuple.of(interval().toMillis() / 2));
                      })
                  .map(finished -> new Pass(true, work.deleted, finished))
                  .invoke(
                      pass -> {
                        if (pass.total() > 0) {
                          LOG.infof(
                              "retention: deleted %s%s",
                              pass.deleted(), pass.finished() ? "" : " (more next pass)");
                        }
                      });
            });
  }

  private Duration interval() {
    return Intervals.orOff(config.retention().interval()).orElse(Duration.ofMinutes(1));
  }

  /** One pass's deletes, in order, until nothing is left or its time is up. */
  private final class Work {
    final Map<String, Long> deleted = new LinkedHashMap<>();
    final long ageMs = config.retention().age().toMillis();
    final int chunk = config.retention().chunkSize();
    // The pass's own time budget, not a lease: a local clock is right for "how long have I run".
    final long deadline;
    final Pool pool;

    Work(Pool pool, Duration budget) {
      this.pool = pool;
      this.deadline = System.nanoTime() + budget.toNanos();
    }

    boolean timeLeft() {
      return System.nanoTime() < deadline;
    }

    /** True when everything due was deleted; false when time ran out first. */
    Uni<Boolean> run() {
      return epochs().chain(done -> done ? instances() : Uni.createFrom().item(false));
    }

    /** The oldest expired closed epoch, one at a time, with everything that hangs off it. */
    Uni<Boolean> epochs() {
      if (!timeLeft()) {
        return Uni.createFrom().item(false);
      }
      return pool.preparedQuery(
              "SELECT id FROM rollcall.epochs WHERE state = 'closed'"
                  + " AND closed_at < now() - $1::bigint * interval '1 millisecond'"
                  + " ORDER BY closed_at LIMIT 1")
          .execute(Tuple.of(ageMs))
          .chain(
              rows -> {
                if (rows.size() == 0) {
                  return Uni.createFrom().item(true);
                }
                long epoch = rows.iterator().next().getLong("id");
                return epoch(epoch).chain(done -> done ? epochs() : Uni.createFrom().item(false));
              });
    }

    /** Deletes one closed epoch: leaves first, the epoch row last. False when time ran out. */
    Uni<Boolean> epoch(long id) {
      return chunks(
              "ledger",
              () ->
                  delete(
                      "DELETE FROM rollcall.ledger WHERE id IN (SELECT id FROM rollcall.ledger"
                          + " WHERE epoch_id = $1 LIMIT $2)",
                      id))
          .chain(
              done ->
                  done
                      ? chunks(
                          "batch_runs",
                          () ->
                              delete(
                                  "DELETE FROM rollcall.batch_runs WHERE (batch_id, run_id) IN"
                                      + " (SELECT r.batch_id, r.run_id FROM rollcall.batches b"
                                      + " JOIN rollcall.batch_runs r ON r.batch_id = b.id"
                                      + " WHERE b.epoch_id = $1 LIMIT $2)",
                                  id))
                      : Uni.createFrom().item(false))
          .chain(
              done ->
                  done
                      ? chunks(
                          "batches",
                          // Newest first: a retry batch (which refers to the batch it retries)
                          // always has a larger id, so it goes first or in the same statement.
                          () ->
                              delete(
                                  "DELETE FROM rollcall.batches WHERE id IN (SELECT id FROM"
                                      + " rollcall.batches WHERE epoch_id = $1"
                                      + " ORDER BY id DESC LIMIT $2)",
                                  id))
                      : Uni.createFrom().item(false))
          .chain(
              done -> {
                if (!done) {
                  return Uni.createFrom().item(false);
                }
                return count(
                        "epoch_counts",
                        delete("DELETE FROM rollcall.epoch_counts WHERE epoch_id = $1", id))
                    .chain(
                        () ->
                            count(
                                "deferred",
                                delete("DELETE FROM rollcall.deferred WHERE epoch_id = $1", id)))
                    .chain(
                        () ->
                            count(
                                "epoch_wake_jobs",
                                delete(
                                    "DELETE FROM rollcall.epoch_wake_jobs WHERE epoch_id = $1",
                                    id)))
                    .chain(
                        () ->
                            count(
                                "epochs",
                                delete(
                                    "DELETE FROM rollcall.epochs WHERE id = $1"
                                        + " AND state = 'closed'",
                                    id)))
                    .replaceWith(true);
              });
    }

    /** Ended instances past the age that no epoch or batch refers to any more. */
    Uni<Boolean> instances() {
      return chunks(
          "instances",
          () ->
              pool.preparedQuery(
                      "WITH gone AS (SELECT i.id FROM rollcall.instances i"
                          + " WHERE i.state <> 'live'"
                          + " AND i.ended_at < now() - $1::bigint * interval '1 millisecond'"
                          + " AND NOT EXISTS (SELECT 1 FROM rollcall.epochs e"
                          + "   WHERE e.subject_instance_id = i.id)"
                          + " AND NOT EXISTS (SELECT 1 FROM rollcall.batches b"
                          + "   WHERE b.claimer_id = i.id)"
                          + " ORDER BY i.ended_at LIMIT $2),"
                          + " owned AS (DELETE FROM rollcall.ownership o USING gone"
                          + "   WHERE o.instance_id = gone.id)"
                          + " DELETE FROM rollcall.instances i USING gone WHERE i.id = gone.id")
                  .execute(Tuple.of(ageMs, chunk))
                  .map(rows -> (long) rows.rowCount()));
    }

    Uni<Long> delete(String sql, long epochId) {
      return sql.contains("$2")
          ? pool.preparedQuery(sql)
              .execute(Tuple.of(epochId, chunk))
              .map(rows -> (long) rows.rowCount())
          : pool.preparedQuery(sql).execute(Tuple.of(epochId)).map(rows -> (long) rows.rowCount());
    }

    Uni<Long> count(String table, Uni<Long> deletion) {
      return deletion.invoke(
          n -> {
            if (n > 0) {
              deleted.merge(table, n, Long::sum);
              meters.counter("rollcall.retention.deleted", "table", table).increment(n);
            }
          });
    }

    /** Repeats a chunked delete until it deletes less than a chunk; false when time ran out. */
    Uni<Boolean> chunks(String table, Supplier<Uni<Long>> step) {
      return count(table, step.get())
          .chain(
              n -> {
                if (n < chunk) {
                  return Uni.createFrom().item(true);
                }
                return timeLeft() ? chunks(table, step) : Uni.createFrom().item(false);
              });
    }
  }
}
