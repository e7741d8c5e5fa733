package dev.rollcall.recovery;

import dev.rollcall.database.Database;
import dev.rollcall.database.Databases;
import dev.rollcall.error.Problems.Conflict;
import dev.rollcall.error.Problems.NotFound;
import dev.rollcall.registry.Endings;
import dev.rollcall.source.RunSource;
import dev.rollcall.source.RunSources;
import io.smallrye.mutiny.Multi;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.SqlClient;
import io.vertx.mutiny.sqlclient.Tuple;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.Optional;
import java.util.UUID;
import org.jboss.logging.Logger;

/**
 * What an operator may do to recovery: start a manual pass, close any pass, evict an instance
 * (declare it dead now), and switch a namespace's boot recovery off and on.
 */
@ApplicationScoped
public class OperatorActions {

  private static final Logger LOG = Logger.getLogger(OperatorActions.class);

  private final Databases databases;
  private final RunSources sources;
  private final Takeovers takeovers;
  private final Epochs epochs;
  private final BootPasses boots;
  private final Endings endings;

  OperatorActions(
      Databases databases,
      RunSources sources,
      Takeovers takeovers,
      Epochs epochs,
      BootPasses boots,
      Endings endings) {
    this.endings = endings;
    this.databases = databases;
    this.sources = sources;
    this.takeovers = takeovers;
    this.epochs = epochs;
    this.boots = boots;
  }

  /**
   * Closes any open epoch now ({@code close_reason = closed-by-operator}): its outstanding batches
   * are given up and nothing more is handed out in it. {@code 404} for an unknown epoch, {@code
   * 409} for one already closed. An epoch of the default database: the admin API's epochs are its.
   */
  public Uni<Long> close(long epochId) {
    return databases
        .primary()
        .pool()
        .withTransaction(
            conn ->
                epochs
                    .close(conn, epochId, "closed-by-operator")
                    .chain(
                        closed -> {
                          if (closed) {
                            LOG.infof("epoch %d closed by an operator", epochId);
                            return Uni.createFrom().item(epochId);
                          }
                          return conn.preparedQuery(
                                  "SELECT state FROM rollcall.epochs WHERE id = $1")
                              .execute(Tuple.of(epochId))
                              .map(
                                  rows -> {
                                    if (rows.size() == 0) {
                                      throw new NotFound("epoch " + epochId);
                                    }
                                    throw new Conflict("epoch " + epochId + " is already closed");
                                  });
                        }));
  }

  /**
   * Opens a {@code manual} pass over the namespace's active runs, classified like a boot pass and
   * served to every live instance of the namespace. One at a time per namespace.
   */
  public Uni<Long> startManual(String namespace) {
    RunSource source = sources.get(namespace);
    return databases
        .of(namespace)
        .pool()
        .withTransaction(
            conn ->
                conn.preparedQuery(
                        "SELECT pg_advisory_xact_lock(hashtext('rollcall.manual.' || $1))")
                    .execute(Tuple.of(namespace))
                    .chain(() -> source.snapshot(conn))
                    // The manual-pass lock, taken before the snapshot, serialises opening with
                    // the check that none is open.
                    .chain(snapshot -> epochs.openManual(conn, namespace, snapshot))
                    .chain(
                        opened -> {
                          if (opened.isEmpty()) {
                            throw new Conflict(
                                "a manual pass of namespace '" + namespace + "' is already open");
                          }
                          long id = opened.get();
                          LOG.infof("epoch %d opened: manual pass of namespace %s", id, namespace);
                          return epochs.prepare(conn, source, id).replaceWith(id);
                        }));
  }

  /**
   * Declares a live instance dead now and opens its takeover; returns the takeover epoch. The
   * instance is looked for in every database (its id is unique in all of them).
   */
  public Uni<Optional<Long>> evict(UUID instanceId) {
    return Multi.createFrom()
        .iterable(databases.serving())
        .onItem()
        .transformToUniAndConcatenate(
            db ->
                db.pool()
                    .preparedQuery("SELECT 1 FROM rollcall.instances WHERE id = $1")
                    .execute(Tuple.of(instanceId))
                    .map(rows -> rows.size() > 0 ? db : null))
        .filter(java.util.Objects::nonNull)
        .collect()
        .first()
        .chain(
            db ->
                db == null
                    ? Uni.createFrom().failure(new NotFound("instance " + instanceId))
                    : evict(db, instanceId));
  }

  private Uni<Optional<Long>> evict(Database db, UUID instanceId) {
    return db.pool()
        .withTransaction(
            conn ->
                endings
                    .declareDead(conn, instanceId, Endings.EVICTED)
                    .chain(
                        dead -> {
                          if (dead.isEmpty()) {
                            return explainNotEvicted(conn, instanceId);
                          }
                          Endings.Dead d = dead.get();
                          LOG.infof("instance %s evicted by an operator", instanceId);
                          return takeovers
                              .open(
                                  conn,
                                  new Takeovers.Subject(
                                      instanceId, d.namespace(), d.workerIds(), d.leaseExpiredAt()))
                              .map(opened -> opened.map(Takeovers.Opened::epochId));
                        }));
  }

  private Uni<Optional<Long>> explainNotEvicted(SqlClient conn, UUID instanceId) {
    return conn.preparedQuery("SELECT state FROM rollcall.instances WHERE id = $1")
        .execute(Tuple.of(instanceId))
        .map(
            rows -> {
              if (rows.size() == 0) {
                throw new NotFound("instance " + instanceId);
              }
              throw new Conflict(
                  "instance "
                      + instanceId
                      + " is "
                      + rows.iterator().next().getString("state")
                      + ", not live");
            });
  }

  /**
   * Switches boot recovery of a namespace, in its database; while off, boot claims answer {@code
   * done} ({@link BootPasses#setSwitch}).
   */
  public Uni<Boolean> setBootRecovery(String namespace, boolean on) {
    sources.get(namespace);
    return Uni.createFrom()
        .deferred(() -> boots.setSwitch(databases.of(namespace).pool(), namespace, on))
        .replaceWith(on)
        .invoke(
            v ->
                LOG.infof(
                    "boot recovery of namespace %s switched %s", namespace, v ? "on" : "off"));
  }
}
