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
import dev.rollcall.database.Databases;
import dev.rollcall.error.Problems.NotFound;
import dev.rollcall.model.Batch;
import dev.rollcall.model.BatchRepository;
import dev.rollcall.model.EpochProgress;
import dev.rollcall.model.EpochProgressRepository;
import dev.rollcall.model.HandOutInFlight;
import dev.rollcall.model.Instance;
import dev.rollcall.model.InstanceRepository;
import dev.rollcall.model.LedgerRow;
import dev.rollcall.model.NamespaceSettingsRepository;
import dev.rollcall.source.RunSources;
import io.quarkus.hibernate.reactive.panache.common.WithSession;
import io.quarkus.panache.common.Sort;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import jakarta.enterprise.context.ApplicationScoped;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.UUID;

/**
 * Read models of the admin API, read with Hibernate Reactive from the control plane's entities
 * ({@code dev.rollcall.model}). Lists are keyset-paginated in a stable order with an opaque cursor.
 * Everything is read from the database, so every service replica shows the same. One session per
 * call, its queries one after the other (a session runs one statement at a time).
 */
@ApplicationScoped
public class AdminService {

  private final InstanceRepository instances;
  private final EpochProgressRepository epochs;
  private final BatchRepository batches;
  private final NamespaceSettingsRepository settings;
  private final RunSources sources;
  private final RollcallConfig config;
  private final Databases databases;

  AdminService(
      InstanceRepository instances,
      EpochProgressRepository epochs,
      BatchRepository batches,
      NamespaceSettingsRepository settings,
      RunSources sources,
      RollcallConfig config,
      Databases databases) {
    this.databases = databases;
    this.instances = instances;
    this.epochs = epochs;
    this.batches = batches;
    this.settings = settings;
    this.sources = sources;
    this.config = config;
  }

  /**
   * Every namespace of the default database with its instances and epochs: the admin API reads the
   * default datasource (its read models are mapped there), so the namespaces of other databases are
   * not listed here (docs/operations.md, "Many databases").
   */
  @WithSession
  public Uni<Page<NamespaceView>> namespaces() {
    return Multi.createFrom()
        .iterable(databases.primary().namespaces())
        .onItem()
        .transformToUniAndConcatenate(this::namespace)
        .collect()
        .asList()
        .map(items -> new Page<>(items, null));
  }

  private Uni<NamespaceView> namespace(String ns) {
    Map<String, Long> counts = new TreeMap<>(Map.of("live", 0L, "dead", 0L, "left", 0L));
    return settings
        .findById(ns)
        .chain(
            switches ->
                // The state as the database's clock has it (a live one whose lease ran out is
                // dead): Instance.shownState.
                Pages.select(
                        "select i.shownState, count(*) from Instance i where i.namespace = :ns"
                            + " group by i.shownState",
                        Map.of("ns", ns))
                    .invoke(rows -> rows.forEach(r -> counts.put((String) r[0], (Long) r[1])))
                    .chain(() -> epochs.count("namespace = ?1 and state = 'open'", ns))
                    .chain(
                        open ->
                            epochs
                                .find("namespace = ?1 and kind = 'boot'", Sort.descending("id"), ns)
                                .firstResult()
                                .map(
                                    boot ->
                                        new NamespaceView(
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
                                            switches == null || switches.bootRecovery,
                                            counts,
                                            open,
                                            boot == null ? null : bootRef(boot)))));
  }

  private static BootEpochRef bootRef(EpochProgress e) {
    return new BootEpochRef(e.id, e.deploymentId, e.state, e.createdAt, e.closedAt);
  }

  /** Instances, newest registration first; live and dead as the database's clock says. */
  @WithSession
  public Uni<Page<InstanceView>> instances(
      String namespace, String state, Integer limit, String cursor) {
    int n = Pages.limit(limit);
    Object[] after = cursor == null ? null : Pages.instanceCursor(Pages.decode(cursor));
    Pages.Where where =
        new Pages.Where()
            .and(namespace, "namespace = :namespace", "namespace")
            .and(state, "shownState = :state", "state");
    if (after != null) {
      where.and(
          "(registeredAt < :at or (registeredAt = :at and id < :id))",
          Map.of("at", after[0], "id", after[1]));
    }
    return instances
        .find(where.query("Instance"), Sort.descending("registeredAt", "id"), where.params())
        .range(0, n)
        .list()
        .map(
            rows -> {
              List<InstanceView> items = new ArrayList<>();
              for (Instance i : rows) {
                items.add(
                    new InstanceView(
                        i.id,
                        i.namespace,
                        i.deploymentId,
                        i.name,
                        i.shownState,
                        i.registeredAt,
                        i.lastHeartbeatAt,
                        i.leaseExpiresAt,
                        i.endedAt,
                        i.endReason,
                        i.inFlight,
                        List.of(i.knownWorkerIds)));
              }
              String next = null;
              if (items.size() > n) {
                items = items.subList(0, n);
                InstanceView last = items.get(n - 1);
                next = Pages.encode(last.registeredAt() + "|" + last.id());
              }
              return new Page<>(items, next);
            });
  }

  /** Epochs, newest first. */
  @WithSession
  public Uni<Page<EpochView>> epochs(
      String namespace, String kind, String state, Integer limit, String cursor) {
    int n = Pages.limit(limit);
    Long after = cursor == null ? null : Pages.parseLong(Pages.decode(cursor));
    Pages.Where where =
        new Pages.Where()
            .and(namespace, "namespace = :namespace", "namespace")
            .and(kind, "kind = :kind", "kind")
            .and(state, "state = :state", "state")
            .and(after, "id < :after", "after");
    return epochs
        .find(where.query("EpochProgress"), Sort.descending("id"), where.params())
        .range(0, n)
        .list()
        .chain(
            rows -> {
              String next =
                  rows.size() > n ? Pages.encode(String.valueOf(rows.get(n - 1).id)) : null;
              return views(rows.size() > n ? rows.subList(0, n) : rows)
                  .map(items -> new Page<>(items, next));
            });
  }

  /** One epoch with its progress. */
  @WithSession
  public Uni<EpochView> epoch(long id) {
    return epochs
        .findById(id)
        .chain(
            e -> {
              if (e == null) {
                throw new NotFound("epoch " + id);
              }
              return views(List.of(e)).map(views -> views.get(0));
            });
  }

  /**
   * The views of some epochs: their progress comes with the rows ({@code rollcall.epoch_progress});
   * the breakdowns by reason, by batch state and by claimer take one grouped query each for all of
   * them. Hand-outs are read as the progress reads them: the ledger's rows and the hand-outs in
   * flight (a leased batch's rows are written with their outcome, V18), so that while batches are
   * leased the reasons and the claimers agree with the runs handed out.
   */
  private Uni<List<EpochView>> views(List<EpochProgress> shown) {
    if (shown.isEmpty()) {
      return Uni.createFrom().item(List.of());
    }
    Map<String, Object> ids = Map.of("ids", shown.stream().map(e -> e.id).toList());
    return Pages.selectSql(
            "SELECT h.epoch_id, h.reason, count(DISTINCT h.run_id) FROM ("
                + HAND_OUTS
                + ") h"
                + " GROUP BY h.epoch_id, h.reason",
            ids)
        .chain(
            handedOut ->
                Pages.select(
                        "select c.epochId, c.reason, sum(c.runs) from EpochCount c"
                            + " where c.epochId in :ids and c.outcome = 'skipped'"
                            + " group by c.epochId, c.reason",
                        ids)
                    .chain(
                        skipped ->
                            Pages.select(
                                    "select b.epochId, b.state, count(*) from Batch b"
                                        + " where b.epochId in :ids group by b.epochId, b.state",
                                    ids)
                                .chain(
                                    batchStates ->
                                        Pages.selectSql(
                                                "SELECT h.epoch_id, h.instance_id, count(DISTINCT h.batch_id), count(*) FROM ("
                                                    + HAND_OUTS
                                                    + ") h GROUP BY h.epoch_id, h.instance_id ORDER BY count(*) DESC",
                                                ids)
                                            .map(
                                                claimers ->
                                                    shown.stream()
                                                        .map(
                                                            e ->
                                                                view(
                                                                    e,
                                                                    byKey(e.id, handedOut),
                                                                    byKey(e.id, skipped),
                                                                    byKey(e.id, batchStates),
                                                                    claimersOf(e.id, claimers)))
                                                        .toList()))));
  }

  private static EpochView view(
      EpochProgress e,
      Map<String, Long> handedOutByReason,
      Map<String, Long> skippedByReason,
      Map<String, Long> batchStates,
      List<Claimer> claimers) {
    long total = batchStates.values().stream().mapToLong(Long::longValue).sum();
    return new EpochView(
        e.id,
        e.namespace,
        e.kind,
        e.state,
        e.closeReason,
        e.deploymentId,
        e.subjectInstanceId,
        e.createdAt,
        e.closedAt,
        e.durationMs,
        e.scanDone,
        e.runsScanned,
        new RunCounts(e.handedOut, e.enqueued, e.failed, e.deferred, e.skipped, e.pendingRecheck),
        handedOutByReason,
        skippedByReason,
        new BatchCounts(
            total,
            batchStates.getOrDefault("ready", 0L),
            batchStates.getOrDefault("leased", 0L),
            batchStates.getOrDefault("completed", 0L),
            batchStates.getOrDefault("abandoned", 0L),
            e.expired),
        claimers);
  }

  /** The counts by key of one epoch, from rows of (epoch id, key, count). */
  private static Map<String, Long> byKey(long epochId, List<Object[]> rows) {
    Map<String, Long> counts = new TreeMap<>();
    for (Object[] r : rows) {
      if ((Long) r[0] == epochId) {
        counts.put((String) r[1], (Long) r[2]);
      }
    }
    return counts;
  }

  private static List<Claimer> claimersOf(long epochId, List<Object[]> rows) {
    List<Claimer> list = new ArrayList<>();
    for (Object[] r : rows) {
      if ((Long) r[0] == epochId) {
        list.add(new Claimer((UUID) r[1], (Long) r[2], (Long) r[3]));
      }
    }
    return list;
  }

  /** The batches of an epoch, in the order they were cut. */
  @WithSession
  public Uni<Page<BatchView>> batches(long epochId, Integer limit, String cursor) {
    int n = Pages.limit(limit);
    Long after = cursor == null ? null : Pages.parseLong(Pages.decode(cursor));
    Pages.Where where =
        new Pages.Where()
            .and(epochId, "epochId = :epoch", "epoch")
            .and(after, "id > :after", "after");
    return epochs
        .count("id", epochId)
        .invoke(
            found -> {
              if (found == 0) {
                throw new NotFound("epoch " + epochId);
              }
            })
        .chain(
            () ->
                batches
                    .find(where.query("Batch"), Sort.ascending("id"), where.params())
                    .range(0, n)
                    .list())
        .map(
            rows -> {
              List<BatchView> items = new ArrayList<>();
              for (Batch b : rows) {
                items.add(
                    new BatchView(
                        b.id,
                        b.state,
                        b.fence,
                        b.attempts,
                        b.claimerId,
                        b.leaseExpiresAt,
                        b.runCount,
                        b.createdAt,
                        b.completedAt,
                        b.retryOf));
              }
              String next = null;
              if (items.size() > n) {
                items = items.subList(0, n);
                next = Pages.encode(String.valueOf(items.get(n - 1).id()));
              }
              return new Page<>(items, next);
            });
  }

  /**
   * Everything the ledger knows about one run of a namespace, then its hand-outs in flight (a batch
   * leased now: no ledger row until its outcome, so no id), and its live owner.
   */
  @WithSession
  public Uni<RunLedger> run(String namespace, String runId) {
    sources.get(namespace);
    Map<String, Object> run = Map.of("ns", namespace, "run", runId);
    return Pages.select(
            "select l, e.kind from LedgerRow l left join EpochProgress e on e.id = l.epochId"
                + " where l.namespace = :ns and l.runId = :run order by l.id",
            run)
        .chain(
            written ->
                Pages.select(
                        "select h, e.kind from HandOutInFlight h, EpochProgress e"
                            + " where e.id = h.epochId and h.namespace = :ns and h.runId = :run"
                            + " order by h.batchId",
                        run)
                    .map(inFlight -> entries(written, inFlight)))
        .chain(
            entries -> {
              return Pages.select(
                      "select o.instanceId, o.reportedAt from OwnedRun o"
                          + " join Instance i on i.id = o.instanceId"
                          + " where o.namespace = :ns and o.runId = :run and i.live = true",
                      run)
                  .map(
                      owners -> {
                        Owner owner =
                            owners.isEmpty()
                                ? null
                                : new Owner(
                                    (UUID) owners.get(0)[0], (OffsetDateTime) owners.get(0)[1]);
                        return new RunLedger(runId, namespace, owner, entries);
                      });
            });
  }

  private static List<LedgerEntry> entries(List<Object[]> written, List<Object[]> inFlight) {
    List<LedgerEntry> entries = new ArrayList<>(written.size() + inFlight.size());
    for (Object[] r : written) {
      LedgerRow l = (LedgerRow) r[0];
      entries.add(
          new LedgerEntry(
              l.id,
              l.epochId,
              (String) r[1],
              l.batchId,
              l.fence,
              l.instanceId,
              l.reason,
              l.outcome,
              l.detail,
              l.recordedAt,
              l.resolvedAt));
    }
    for (Object[] r : inFlight) {
      HandOutInFlight h = (HandOutInFlight) r[0];
      entries.add(
          new LedgerEntry(
              null,
              h.epochId,
              (String) r[1],
              h.batchId,
              h.fence,
              h.instanceId,
              h.reason,
              "leased",
              h.detail,
              h.recordedAt,
              null));
    }
    return entries;
  }

  /**
   * The hand-outs of the epochs {@code :ids}, one row per run per batch and fence: written ones
   * (the ledger's rows with a batch) and those in flight, as {@code rollcall.epoch_progress} counts
   * them: plain SQL, one statement like the view's.
   */
  private static final String HAND_OUTS =
      "SELECT l.epoch_id, l.reason, l.run_id, l.instance_id, l.batch_id FROM rollcall.ledger l"
          + " WHERE l.epoch_id IN (:ids) AND l.batch_id IS NOT NULL"
          + " UNION ALL SELECT f.epoch_id, f.reason, f.run_id, f.instance_id, f.batch_id"
          + " FROM rollcall.hand_outs_in_flight f WHERE f.epoch_id IN (:ids)";
}
