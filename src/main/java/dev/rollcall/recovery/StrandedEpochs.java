package dev.rollcall.recovery;

import dev.rollcall.config.RollcallConfig;
import dev.rollcall.database.Database;
import dev.rollcall.database.Databases;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.Pool;
import io.vertx.mutiny.sqlclient.Row;
import io.vertx.mutiny.sqlclient.RowSet;
import io.vertx.mutiny.sqlclient.SqlClient;
import io.vertx.mutiny.sqlclient.Tuple;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.ArrayList;
import java.util.List;
import org.jboss.logging.Logger;

/**
 * Closes boot epochs nobody can finish: their deployment has had no live instance for longer than
 * {@code rollcall.stranded-epoch-grace}; and boot epochs a later deploy's pass superseded, which
 * its creator closes right after creating it, should that creator have died in between ({@link
 * #closeSuperseded}). Runs on the reaper's interval, on every service replica, when the reaper's
 * look finds an open boot epoch ({@link ReaperTick}; each close is one guarded update, so replicas
 * racing close each epoch once). The closes themselves are {@link Epochs#close}, the epochs' one
 * writer; here is only which epochs to close.
 */
@ApplicationScoped
public class StrandedEpochs {

  private static final Logger LOG = Logger.getLogger(StrandedEpochs.class);

  private final Databases databases;
  private final Epochs epochs;
  private final RollcallConfig config;

  StrandedEpochs(Databases databases, Epochs epochs, RollcallConfig config) {
    this.databases = databases;
    this.epochs = epochs;
    this.config = config;
  }

  /**
   * Whether some namespace of the array parameter {@code param} has an open boot epoch: the
   * reaper's look ({@link ReaperTick}) runs {@link #runOnce} only then.
   */
  static String anyOpenBoot(String param) {
    return "EXISTS (SELECT 1 FROM rollcall.epochs WHERE state = 'open' AND kind = 'boot'"
        + " AND namespace = ANY("
        + param
        + "::text[]))";
  }

  /**
   * One pass over every namespace with an open boot epoch (one read finds them; a service at rest
   * has none); returns the epochs it closed. Tests call it directly.
   */
  public Uni<List<Long>> runOnce() {
    return databases.inTurn(this::runOnce).map(Databases::flat);
  }

  /** {@link #runOnce()} over the namespaces of one database. */
  public Uni<List<Long>> runOnce(Database db) {
    Pool pool = db.pool();
    return withOpenBoot(pool, db.namespaces())
        .onItem()
        .transformToMulti(namespaces -> Multi.createFrom().iterable(namespaces))
        .onItem()
        .transformToUniAndConcatenate(
            ns ->
                pool.withTransaction(conn -> closeSuperseded(conn, ns))
                    .chain(
                        superseded ->
                            pool.withTransaction(conn -> closeStranded(conn, ns, graceMs()))
                                .map(
                                    stranded -> {
                                      List<Long> closed = new ArrayList<>(superseded);
                                      closed.addAll(stranded);
                                      return closed;
                                    })))
        .onItem()
        .transformToIterable(closed -> closed)
        .collect()
        .asList();
  }

  /** The grace in milliseconds. */
  long graceMs() {
    return config.strandedEpochGrace().toMillis();
  }

  /**
   * Which of {@code namespaces} have an open boot epoch: the only ones {@link #closeSuperseded} and
   * {@link #closeStranded} can act on. One statement for every namespace (the partial index of open
   * epochs answers it), so that the periodic check costs a service at rest one read per interval,
   * not two transactions per namespace.
   */
  public Uni<List<String>> withOpenBoot(SqlClient client, java.util.Collection<String> namespaces) {
    return client
        .preparedQuery(
            "SELECT DISTINCT namespace FROM rollcall.epochs WHERE state = 'open' AND kind = 'boot'"
                + " AND namespace = ANY($1::text[]) ORDER BY namespace")
        .execute(Tuple.of(namespaces.toArray(String[]::new)))
        .map(
            rows -> {
              List<String> out = new ArrayList<>(rows.size());
              rows.forEach(r -> out.add(r.getString("namespace")));
              return out;
            });
  }

  /**
   * Closes, as {@code superseded}, every open boot epoch of the namespace that a later boot epoch
   * supersedes: one created after it (a higher id) for a deploy whose first instance registered
   * after its own deploy's first. Two deploys live side by side (blue/green, canary) each keep
   * their own pass, whichever opened first; a deploy whose instances are all gone (and forgotten)
   * counts as older. The creator of a boot epoch calls this once its epoch committed, and the
   * periodic check of {@link StrandedEpochs} calls it too, so a creator that dies between the two
   * leaves the older pass open for one reaper interval at most. Returns the epochs it closed.
   */
  public Uni<List<Long>> closeSuperseded(SqlClient client, String namespace) {
    return client
        .preparedQuery(
            "SELECT id, by_id FROM (SELECT x.id, (SELECT min(y.id) FROM rollcall.epochs y"
                + "   WHERE y.namespace = $1"
                + "   AND y.kind = 'boot' AND y.id > x.id"
                + "   AND coalesce((SELECT min(i.registered_at) FROM rollcall.instances i"
                + "     WHERE i.namespace = $1 AND i.deployment_id = x.deployment_id),"
                + "     '-infinity') < (SELECT min(i.registered_at) FROM rollcall.instances i"
                + "     WHERE i.namespace = $1 AND i.deployment_id = y.deployment_id)) AS by_id"
                + " FROM rollcall.epochs x"
                + " WHERE x.namespace = $1 AND x.kind = 'boot' AND x.state = 'open') s"
                + " WHERE by_id IS NOT NULL ORDER BY id")
        .execute(Tuple.of(namespace))
        // In id order, one epoch's lock at a time: two closers never wait on each other the
        // other way round.
        .chain(
            rows ->
                closeEach(
                    client,
                    rows,
                    "superseded",
                    r ->
                        LOG.infof(
                            "epoch %d closed: superseded by boot epoch %d",
                            r.getLong("id"), r.getLong("by_id"))));
  }

  /**
   * Closes, as {@code stranded}, every open boot epoch of the namespace whose deployment has had no
   * live instance for longer than {@code graceMs}: a rollout aborted mid-recovery and rolled back
   * to an earlier deployment id would otherwise leave it open for good, and block sweeps. The last
   * moment a deployment was present is the latest end (or lease expiry) of its instances; a
   * deployment whose instances were all forgotten counts from the epoch's creation. Returns the
   * epochs it closed.
   */
  public Uni<List<Long>> closeStranded(SqlClient client, String namespace, long graceMs) {
    return client
        .preparedQuery(
            "SELECT e.id, e.deployment_id FROM rollcall.epochs e"
                + " WHERE e.namespace = $1 AND e.kind = 'boot' AND e.state = 'open'"
                + " AND NOT EXISTS (SELECT 1 FROM rollcall.instances i"
                + "   WHERE i.namespace = $1 AND i.deployment_id = e.deployment_id"
                + "   AND rollcall.is_live(i.state, i.lease_expires_at))"
                // least() ignores nulls: a live-state instance whose lease ran out (not reaped
                // yet) was last present at its lease expiry.
                + " AND coalesce((SELECT max(least(i.ended_at, i.lease_expires_at))"
                + "   FROM rollcall.instances i"
                + "   WHERE i.namespace = $1 AND i.deployment_id = e.deployment_id), e.created_at)"
                + "   <= now() - $2::bigint * interval '1 millisecond'"
                + " ORDER BY e.id")
        .execute(Tuple.of(namespace, graceMs))
        .chain(
            rows ->
                closeEach(
                    client,
                    rows,
                    "stranded",
                    r ->
                        LOG.warnf(
                            "epoch %d closed: stranded, deployment %s of namespace %s has had no"
                                + " live instance for %d ms",
                            r.getLong("id"), r.getString("deployment_id"), namespace, graceMs)));
  }

  /**
   * Closes the epochs of the rows (column {@code id}) one after another, in the rows' order ({@link
   * #close}); returns those this call closed, each row reported to {@code closed} as it is.
   */
  private Uni<List<Long>> closeEach(
      SqlClient client, RowSet<Row> rows, String reason, java.util.function.Consumer<Row> closed) {
    List<Long> done = new ArrayList<>();
    // A stream, not a chain built in a loop: constant stack depth however many rows.
    return Multi.createFrom()
        .iterable(rows)
        .onItem()
        .transformToUniAndConcatenate(
            r ->
                epochs
                    .close(client, r.getLong("id"), reason)
                    .invoke(
                        now -> {
                          if (now) {
                            done.add(r.getLong("id"));
                            closed.accept(r);
                          }
                        }))
        .onItem()
        .ignoreAsUni()
        .map(ignored -> done);
  }
}
