package dev.rollcall.admin;

import dev.rollcall.admin.AdminViews.BatchCounts;
import dev.rollcall.admin.AdminViews.BatchView;
import dev.rollcall.admin.AdminViews.BootEpochRef;
import dev.rollcall.admin.AdminViews.Claimer;
import dev.rollcall.admin.AdminViews.EpochView;
import dev.rollcall.admin.AdminViews.InstanceView;
import dev.rollcall.admin.AdminViews.LedgerEntry;
import dev.rollcall.admin.AdminViews.NamespaceView;
import dev.rollcall.admin.AdminViews.Owner;
import dev.rollcall.admin.AdminViews.Page;
import dev.rollcall.admin.AdminViews.RunCounts;
import dev.rollcall.admin.AdminViews.RunLedger;
import dev.rollcall.config.RollcallConfig;
import dev.rollcall.error.Problems.InvalidRequest;
import dev.rollcall.error.Problems.NotFound;
import dev.rollcall.source.RunSources;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Pool;
import io.vertx.mutiny.sqlclient.Row;
import io.vertx.mutiny.sqlclient.Tuple;
import jakarta.enterprise.context.ApplicationScoped;
import java.nio.charset.StandardCharsets;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.UUID;

/**
 * Read models of the admin API. Lists are keyset-paginated in a stable order with an opaque cursor.
 * Everything is read from the database, so every service replica shows the same.
 */
@ApplicationScoped
public class AdminService {

  /** The largest page a list returns. */
  static final int MAX_LIMIT = 500;

  private final Pool pool;
  private final RunSources sources;
  private final RollcallConfig config;

  AdminService(Pool pool, RunSources sources, RollcallConfig config) {
    this.pool = pool;
    this.sources = sources;
    this.config = config;
  }

  /** Every configured namespace with its instances and epochs. */
  public Uni<Page<NamespaceView>> namespaces() {
    return Multi.createFrom()
        .iterable(new TreeMap<>(config.namespaces()).keySet())
        .onItem()
        .transformToUniAndConcatenate(this::namespace)
        .collect()
        .asList()
        .map(items -> new Page<>(items, null));
  }

  private Uni<NamespaceView> namespace(String ns) {
    return pool.preparedQuery(
            "SELECT"
                + " (SELECT coalesce(boot_recovery, true) FROM rollcall.namespace_settings"
                + "   WHERE namespace = $1) AS boot_recovery,"
                + " (SELECT count(*) FROM rollcall.instances WHERE namespace = $1"
                + "   AND rollcall.is_live(state, lease_expires_at)) AS live,"
                + " (SELECT count(*) FROM rollcall.instances WHERE namespace = $1"
                + "   AND (state = 'dead' OR (rollcall.is_expired(state, lease_expires_at))))"
                + "   AS dead,"
                + " (SELECT count(*) FROM rollcall.instances WHERE namespace = $1"
                + "   AND state = 'left') AS left_,"
                + " (SELECT count(*) FROM rollcall.epochs WHERE namespace = $1"
                + "   AND state = 'open') AS open_epochs")
        .execute(Tuple.of(ns))
        .chain(
            rows -> {
              Row r = rows.iterator().next();
              return pool.preparedQuery(
                      "SELECT id, deployment_id, state, created_at, closed_at FROM rollcall.epochs"
                          + " WHERE namespace = $1 AND kind = 'boot' ORDER BY id DESC LIMIT 1")
                  .execute(Tuple.of(ns))
                  .map(
                      boot -> {
                        BootEpochRef last =
                            boot.size() == 0 ? null : bootRef(boot.iterator().next());
                        Boolean on = r.getBoolean("boot_recovery");
                        return new NamespaceView(
                            ns,
                            config
                                .namespaces()
                                .get(ns)
                                .source()
                                .kind()
                                .name()
                                .toLowerCase(Locale.ROOT)
                                .replace('_', '-'),
                            sources.get(ns).describe(),
                            on == null || on,
                            Map.of(
                                "live", r.getLong("live"),
                                "dead", r.getLong("dead"),
                                "left", r.getLong("left_")),
                            r.getLong("open_epochs"),
                            last);
                      });
            });
  }

  private static BootEpochRef bootRef(Row r) {
    return new BootEpochRef(
        r.getLong("id"),
        r.getString("deployment_id"),
        r.getString("state"),
        r.getOffsetDateTime("created_at"),
        r.getOffsetDateTime("closed_at"));
  }

  /** Instances, newest registration first; live and dead as the database's clock says. */
  public Uni<Page<InstanceView>> instances(
      String namespace, String state, Integer limit, String cursor) {
    int n = limit(limit);
    Object[] after = cursor == null ? null : instanceCursor(decode(cursor));
    return pool.preparedQuery(
            "SELECT i.*, CASE WHEN rollcall.is_expired(i.state, i.lease_expires_at) THEN 'dead'"
                + " ELSE i.state END AS shown_state,"
                + " (SELECT count(*) FROM rollcall.ownership o WHERE o.instance_id = i.id)"
                + " AS in_flight,"
                // Registered worker ids, then those learned from the queue.
                + " i.worker_ids || ARRAY(SELECT w.worker_id FROM rollcall.queue_workers w"
                + "   WHERE w.instance_id = i.id AND w.worker_id <> ALL(i.worker_ids)"
                + "   ORDER BY w.learned_at, w.worker_id) AS known_worker_ids"
                + " FROM rollcall.instances i"
                + " WHERE ($1::text IS NULL OR i.namespace = $1)"
                + " AND ($2::text IS NULL OR (CASE WHEN"
                + "   rollcall.is_expired(i.state, i.lease_expires_at) THEN 'dead' ELSE i.state END) = $2)"
                + " AND ($3::timestamptz IS NULL OR (i.registered_at, i.id) < ($3, $4::uuid))"
                + " ORDER BY i.registered_at DESC, i.id DESC LIMIT $5")
        .execute(
            Tuple.from(
                java.util.Arrays.asList(
                    namespace,
                    state,
                    after == null ? null : after[0],
                    after == null ? null : after[1],
                    n + 1)))
        .map(
            rows -> {
              List<InstanceView> items = new ArrayList<>();
              for (Row r : rows) {
                items.add(
                    new InstanceView(
                        r.getUUID("id"),
                        r.getString("namespace"),
                        r.getString("deployment_id"),
                        r.getString("name"),
                        r.getString("shown_state"),
                        r.getOffsetDateTime("registered_at"),
                        r.getOffsetDateTime("last_heartbeat_at"),
                        r.getOffsetDateTime("lease_expires_at"),
                        r.getOffsetDateTime("ended_at"),
                        r.getString("end_reason"),
                        r.getLong("in_flight"),
                        List.of(r.getArrayOfStrings("known_worker_ids"))));
              }
              String next = null;
              if (items.size() > n) {
                items = items.subList(0, n);
                InstanceView last = items.get(n - 1);
                next = encode(last.registeredAt() + "|" + last.id());
              }
              return new Page<>(items, next);
            });
  }

  /** Epochs, newest first. */
  public Uni<Page<EpochView>> epochs(
      String namespace, String kind, String state, Integer limit, String cursor) {
    int n = limit(limit);
    Long after = cursor == null ? null : parseLong(decode(cursor));
    return pool.preparedQuery(
            "SELECT id FROM rollcall.epochs WHERE ($1::text IS NULL OR namespace = $1)"
                + " AND ($2::text IS NULL OR kind = $2) AND ($3::text IS NULL OR state = $3)"
                + " AND ($4::bigint IS NULL OR id < $4) ORDER BY id DESC LIMIT $5")
        .execute(Tuple.from(java.util.Arrays.asList(namespace, kind, state, after, n + 1)))
        .chain(
            rows -> {
              List<Long> ids = new ArrayList<>();
              rows.forEach(r -> ids.add(r.getLong("id")));
              String next = ids.size() > n ? encode(String.valueOf(ids.get(n - 1))) : null;
              List<Long> shown = ids.size() > n ? ids.subList(0, n) : ids;
              return Multi.createFrom()
                  .iterable(shown)
                  .onItem()
                  .transformToUniAndConcatenate(this::epoch)
                  .collect()
                  .asList()
                  .map(items -> new Page<>(items, next));
            });
  }

  /** One epoch with its progress. */
  public Uni<EpochView> epoch(long id) {
    return pool.preparedQuery(
            "SELECT e.*, (extract(epoch FROM coalesce(e.closed_at, now()) - e.created_at) * 1000)"
                + "::bigint AS duration_ms,"
                + " (SELECT count(DISTINCT run_id) FROM rollcall.ledger l WHERE l.epoch_id = e.id"
                + "   AND l.batch_id IS NOT NULL) AS handed_out,"
                + " (SELECT count(DISTINCT run_id) FROM rollcall.ledger l WHERE l.epoch_id = e.id"
                + "   AND l.outcome = 'enqueued') AS enqueued,"
                + " (SELECT count(*) FROM rollcall.ledger l WHERE l.epoch_id = e.id"
                + "   AND l.outcome = 'failed') AS failed,"
                // Deferrals and skips are counted per pass (the ledger keeps only a run's first).
                + " (SELECT coalesce(sum(c.runs), 0) FROM rollcall.epoch_counts c"
                + "   WHERE c.epoch_id = e.id AND c.outcome = 'deferred')::bigint AS deferred,"
                + " (SELECT coalesce(sum(c.runs), 0) FROM rollcall.epoch_counts c"
                + "   WHERE c.epoch_id = e.id AND c.outcome = 'skipped')::bigint AS skipped,"
                + " (SELECT count(*) FROM rollcall.deferred d WHERE d.epoch_id = e.id)"
                + "   AS pending_recheck,"
                + " (SELECT count(DISTINCT (batch_id, fence)) FROM rollcall.ledger l"
                + "   WHERE l.epoch_id = e.id AND l.outcome = 'lease-expired') AS expired"
                + " FROM rollcall.epochs e WHERE e.id = $1")
        .execute(Tuple.of(id))
        .chain(
            rows -> {
              if (rows.size() == 0) {
                throw new NotFound("epoch " + id);
              }
              Row e = rows.iterator().next();
              return Uni.combine()
                  .all()
                  .unis(
                      counts(
                          "SELECT reason AS k, count(DISTINCT run_id) AS n FROM rollcall.ledger"
                              + " WHERE epoch_id = $1 AND batch_id IS NOT NULL GROUP BY reason",
                          id),
                      counts(
                          "SELECT reason AS k, runs AS n FROM rollcall.epoch_counts"
                              + " WHERE epoch_id = $1 AND outcome = 'skipped'",
                          id),
                      counts(
                          "SELECT state AS k, count(*) AS n FROM rollcall.batches"
                              + " WHERE epoch_id = $1 GROUP BY state",
                          id),
                      claimers(id))
                  .asTuple()
                  .map(
                      t -> {
                        Map<String, Long> batchStates = t.getItem3();
                        long total = batchStates.values().stream().mapToLong(Long::longValue).sum();
                        return new EpochView(
                            id,
                            e.getString("namespace"),
                            e.getString("kind"),
                            e.getString("state"),
                            e.getString("close_reason"),
                            e.getString("deployment_id"),
                            e.getUUID("subject_instance_id"),
                            e.getOffsetDateTime("created_at"),
                            e.getOffsetDateTime("closed_at"),
                            e.getLong("duration_ms"),
                            e.getBoolean("scan_done"),
                            e.getLong("runs_scanned"),
                            new RunCounts(
                                e.getLong("handed_out"),
                                e.getLong("enqueued"),
                                e.getLong("failed"),
                                e.getLong("deferred"),
                                e.getLong("skipped"),
                                e.getLong("pending_recheck")),
                            t.getItem1(),
                            t.getItem2(),
                            new BatchCounts(
                                total,
                                batchStates.getOrDefault("ready", 0L),
                                batchStates.getOrDefault("leased", 0L),
                                batchStates.getOrDefault("completed", 0L),
                                batchStates.getOrDefault("abandoned", 0L),
                                e.getLong("expired")),
                            t.getItem4());
                      });
            });
  }

  private Uni<Map<String, Long>> counts(String sql, long epochId) {
    return pool.preparedQuery(sql)
        .execute(Tuple.of(epochId))
        .map(
            rows -> {
              Map<String, Long> counts = new TreeMap<>();
              rows.forEach(r -> counts.put(r.getString("k"), r.getLong("n")));
              return counts;
            });
  }

  private Uni<List<Claimer>> claimers(long epochId) {
    return pool.preparedQuery(
            "SELECT instance_id, count(DISTINCT batch_id) AS batches, count(*) AS runs"
                + " FROM rollcall.ledger WHERE epoch_id = $1 AND batch_id IS NOT NULL"
                + " GROUP BY instance_id ORDER BY count(*) DESC")
        .execute(Tuple.of(epochId))
        .map(
            rows -> {
              List<Claimer> list = new ArrayList<>();
              rows.forEach(
                  r ->
                      list.add(
                          new Claimer(
                              r.getUUID("instance_id"), r.getLong("batches"), r.getLong("runs"))));
              return list;
            });
  }

  /** The batches of an epoch, in the order they were cut. */
  public Uni<Page<BatchView>> batches(long epochId, Integer limit, String cursor) {
    int n = limit(limit);
    Long after = cursor == null ? null : parseLong(decode(cursor));
    return epoch(epochId)
        .chain(
            exists ->
                pool.preparedQuery(
                        "SELECT * FROM rollcall.batches WHERE epoch_id = $1"
                            + " AND ($2::bigint IS NULL OR id > $2) ORDER BY id LIMIT $3")
                    .execute(Tuple.from(java.util.Arrays.asList(epochId, after, n + 1))))
        .map(
            rows -> {
              List<BatchView> items = new ArrayList<>();
              for (Row r : rows) {
                items.add(
                    new BatchView(
                        r.getLong("id"),
                        r.getString("state"),
                        r.getInteger("fence"),
                        r.getInteger("attempts"),
                        r.getUUID("claimer_id"),
                        r.getOffsetDateTime("lease_expires_at"),
                        r.getInteger("run_count"),
                        r.getOffsetDateTime("created_at"),
                        r.getOffsetDateTime("completed_at"),
                        r.getLong("retry_of")));
              }
              String next = null;
              if (items.size() > n) {
                items = items.subList(0, n);
                next = encode(String.valueOf(items.get(n - 1).id()));
              }
              return new Page<>(items, next);
            });
  }

  /** Everything the ledger knows about one run of a namespace, and its live owner. */
  public Uni<RunLedger> run(String namespace, String runId) {
    sources.get(namespace);
    return pool.preparedQuery(
            "SELECT l.*, e.kind FROM rollcall.ledger l LEFT JOIN rollcall.epochs e ON e.id = l.epoch_id"
                + " WHERE l.namespace = $1 AND l.run_id = $2 ORDER BY l.id")
        .execute(Tuple.of(namespace, runId))
        .chain(
            rows -> {
              List<LedgerEntry> entries = new ArrayList<>();
              for (Row r : rows) {
                entries.add(
                    new LedgerEntry(
                        r.getLong("id"),
                        r.getLong("epoch_id"),
                        r.getString("kind"),
                        r.getLong("batch_id"),
                        r.getInteger("fence"),
                        r.getUUID("instance_id"),
                        r.getString("reason"),
                        r.getString("outcome"),
                        r.getString("detail"),
                        r.getOffsetDateTime("recorded_at"),
                        r.getOffsetDateTime("resolved_at")));
              }
              return pool.preparedQuery(
                      "SELECT o.instance_id, o.reported_at FROM rollcall.ownership o"
                          + " JOIN rollcall.instances i ON i.id = o.instance_id"
                          + " WHERE o.namespace = $1 AND o.run_id = $2 AND"
                          + " rollcall.is_live(i.state, i.lease_expires_at) LIMIT 1")
                  .execute(Tuple.of(namespace, runId))
                  .map(
                      owners -> {
                        Owner owner =
                            owners.size() == 0
                                ? null
                                : new Owner(
                                    owners.iterator().next().getUUID("instance_id"),
                                    owners.iterator().next().getOffsetDateTime("reported_at"));
                        return new RunLedger(runId, namespace, owner, entries);
                      });
            });
  }

  private static int limit(Integer limit) {
    if (limit == null) {
      return 50;
    }
    if (limit < 1 || limit > MAX_LIMIT) {
      throw new InvalidRequest("'limit' must be between 1 and " + MAX_LIMIT);
    }
    return limit;
  }

  private static String encode(String cursor) {
    return Base64.getUrlEncoder()
        .withoutPadding()
        .encodeToString(cursor.getBytes(StandardCharsets.UTF_8));
  }

  private static String decode(String cursor) {
    try {
      return new String(Base64.getUrlDecoder().decode(cursor), StandardCharsets.UTF_8);
    } catch (IllegalArgumentException e) {
      throw new InvalidRequest("'cursor' is not a cursor this API returned");
    }
  }

  private static Object[] instanceCursor(String value) {
    try {
      String[] parts = value.split("\\|", 2);
      return new Object[] {OffsetDateTime.parse(parts[0]), UUID.fromString(parts[1])};
    } catch (RuntimeException e) {
      throw new InvalidRequest("'cursor' is not a cursor this API returned");
    }
  }

  private static long parseLong(String value) {
    try {
      return Long.parseLong(value);
    } catch (NumberFormatException e) {
      throw new InvalidRequest("'cursor' is not a cursor this API returned");
    }
  }
}
