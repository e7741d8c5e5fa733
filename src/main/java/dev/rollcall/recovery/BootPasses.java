package dev.rollcall.recovery;

import dev.rollcall.concurrency.Gate;
import dev.rollcall.registry.InstanceGuards;
import dev.rollcall.source.RunSource;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.SqlClient;
import io.vertx.mutiny.sqlclient.Tuple;
import jakarta.enterprise.context.ApplicationScoped;
import org.jboss.logging.Logger;

/**
 * A claim's stage for its deploy's own pass: whether an operator switched the namespace's boot
 * recovery off, and the deploy's first claim opening the pass.
 */
@ApplicationScoped
class BootPasses {

  private static final Logger LOG = Logger.getLogger(BootPasses.class);

  private final Gate gate;
  private final InstanceGuards guards;
  private final Epochs epochs;
  private final StrandedEpochs stranded;

  BootPasses(Gate gate, InstanceGuards guards, Epochs epochs, StrandedEpochs stranded) {
    this.gate = gate;
    this.guards = guards;
    this.epochs = epochs;
    this.stranded = stranded;
  }

  /**
   * Sets a namespace's boot-recovery switch, creating its row on first use. One statement (an
   * upsert, stamped with the database's clock), so that operators switching at once on any service
   * replica never collide on the first row; the last one wins.
   */
  Uni<Void> setSwitch(SqlClient client, String namespace, boolean on) {
    return client
        .preparedQuery(
            "INSERT INTO rollcall.namespace_settings (namespace, boot_recovery, updated_at)"
                + " VALUES ($1, $2, now()) ON CONFLICT (namespace) DO UPDATE"
                + " SET boot_recovery = excluded.boot_recovery, updated_at = excluded.updated_at")
        .execute(Tuple.of(namespace, on))
        .replaceWithVoid();
  }

  /**
   * Whether the namespace's boot recovery is on: the switch an operator writes through the settings
   * entity ({@link OperatorActions#setBootRecovery}), on when the namespace has no row.
   */
  Uni<Boolean> switchedOn(SqlClient conn, String namespace) {
    return conn.preparedQuery(
            "SELECT boot_recovery FROM rollcall.namespace_settings WHERE namespace = $1")
        .execute(Tuple.of(namespace))
        .map(rows -> rows.size() == 0 || rows.iterator().next().getBoolean("boot_recovery"));
  }

  /**
   * Creates the deploy's boot epoch, unless a concurrent first claim did, in one short transaction:
   * the snapshot bound, the row and the source's preparation of its evidence. Concurrent first
   * claims of the deploy, on any service replica, wait on the row's unique key for this transaction
   * and no longer. The creator's claim does not wait for the close of the passes the new one
   * supersedes either ({@link #closeSupersededLater}).
   */
  Uni<Void> open(ClaimContext claim) {
    RunSource source = claim.source();
    return gate.run(
            () ->
                claim
                    .pool()
                    .withTransaction(
                        conn ->
                            guards
                                .requireLive(conn, claim.instanceId())
                                .chain(() -> claim.fromSource(source.snapshot(conn)))
                                .chain(
                                    snapshot ->
                                        epochs.createBoot(
                                            conn,
                                            claim.namespace(),
                                            claim.caller().deploymentId(),
                                            snapshot,
                                            claim.instanceId()))
                                .call(
                                    created ->
                                        created.isPresent()
                                            ? epochs.prepare(conn, source, created.get())
                                            : Uni.createFrom().voidItem())))
        .invoke(created -> created.ifPresent(id -> closeSupersededLater(claim, id)))
        .replaceWithVoid();
  }

  /**
   * Closes the passes a new boot epoch supersedes, once it has committed, in a transaction of its
   * own that its creator's claim does not wait for: closing waits for each old epoch's lock, which
   * the old deploy's claimers hold while they cut pages (hundreds of milliseconds under load, all
   * of it added to the creator's claim when it waited). The new pass serves meanwhile; the periodic
   * check closes what this could not.
   */
  private void closeSupersededLater(ClaimContext claim, long created) {
    String namespace = claim.namespace();
    gate.runAhead(
            () -> claim.pool().withTransaction(conn -> stranded.closeSuperseded(conn, namespace)))
        .subscribe()
        .with(
            ignored -> {},
            e ->
                LOG.warnf(
                    "boot epoch %d of namespace %s: older passes not closed yet (%s); the"
                        + " stranded-epoch check retries",
                    created, namespace, e.toString()));
  }
}
