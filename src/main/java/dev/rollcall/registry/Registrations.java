package dev.rollcall.registry;

import dev.rollcall.config.RollcallConfig;
import dev.rollcall.database.Database;
import dev.rollcall.database.Databases;
import dev.rollcall.error.Problems.Unauthorized;
import dev.rollcall.error.Problems.UnknownNamespace;
import io.smallrye.mutiny.Uni;
import io.vertx.core.buffer.Buffer;
import io.vertx.mutiny.sqlclient.Row;
import io.vertx.mutiny.sqlclient.SqlClient;
import io.vertx.mutiny.sqlclient.Tuple;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import org.jboss.logging.Logger;

/**
 * Registration and authentication: a new instance row with its token's hash and first lease, and
 * the instance a bearer token belongs to. An instance is live while {@code state = 'live'} and its
 * lease has not expired by the database's clock: the SQL function {@code rollcall.is_live} is that
 * rule (and {@code rollcall.is_expired} its complement the reaper acts on); every statement that
 * acts on liveness decides it itself, so two service replicas can never disagree about whether an
 * instance is live. Leases are renewed by {@link Heartbeats} and end in {@link Endings}.
 */
@ApplicationScoped
public class Registrations {

  private static final Logger LOG = Logger.getLogger(Registrations.class);

  private final Databases databases;
  private final Ownership ownership;
  private final WorkerLearning workers;
  private final RollcallConfig config;
  private final TokenCache tokens = new TokenCache(TokenCache.DEFAULT_CAPACITY);

  Registrations(
      Databases databases, Ownership ownership, WorkerLearning workers, RollcallConfig config) {
    this.databases = databases;
    this.ownership = ownership;
    this.workers = workers;
    this.config = config;
  }

  /**
   * What a registering instance says of itself: its namespace and deploy, its name, the queue
   * workers it runs and, optionally, the runs it is executing already.
   */
  public record NewInstance(
      String namespace,
      String deploymentId,
      String name,
      List<String> workerIds,
      Optional<List<InFlight>> inFlight) {}

  /** Registers a new instance after checking the namespace's registration secret. */
  public Uni<Registration> register(String secret, NewInstance instance) {
    String namespace = instance.namespace();
    RollcallConfig.NamespaceConfig ns = config.namespaces().get(namespace);
    if (ns == null) {
      return Uni.createFrom().failure(new UnknownNamespace(namespace));
    }
    if (!Tokens.constantTimeEquals(ns.registrationSecret(), secret)) {
      return Uni.createFrom()
          .failure(
              new Unauthorized(
                  "the registration secret of namespace '" + namespace + "' is wrong"));
    }
    Database db = databases.of(namespace);
    String token = Tokens.generate(db.name(), Databases.DEFAULT);
    // The first in-flight set comes with the registration, in the same transaction, so that the
    // instance's own first claim can never hand out the runs it is already executing.
    return db.pool()
        .withTransaction(
            conn ->
                insert(conn, instance, token)
                    .call(
                        registered ->
                            instance
                                .inFlight()
                                .map(
                                    set ->
                                        ownership.replace(
                                            conn,
                                            new Caller(
                                                registered.instanceId(),
                                                namespace,
                                                instance.deploymentId()),
                                            set))
                                .orElse(Uni.createFrom().voidItem())))
        .call(
            registered ->
                workers.learn(
                    namespace,
                    WorkerLearning.reported(registered.instanceId(), instance.inFlight())));
  }

  private Uni<Registration> insert(SqlClient conn, NewInstance instance, String token) {
    return conn.preparedQuery(
            "INSERT INTO rollcall.instances"
                + " (id, namespace, deployment_id, name, worker_ids, token_hash, lease_expires_at)"
                + " VALUES (gen_random_uuid(), $1, $2, $3, $4, $5,"
                + " now() + $6::bigint * interval '1 millisecond')"
                + " RETURNING id, lease_expires_at,"
                + " rollcall.session_lock_objid(id) AS session_lock_objid")
        .execute(
            Tuple.of(
                instance.namespace(),
                instance.deploymentId(),
                instance.name(),
                instance.workerIds().toArray(String[]::new),
                Buffer.buffer(Tokens.hash(token)),
                config.leaseTtl().toMillis()))
        .map(
            rows -> {
              Row row = rows.iterator().next();
              UUID id = row.getUUID("id");
              LOG.infof(
                  "instance %s registered in namespace %s (deployment %s, name %s)",
                  id, instance.namespace(), instance.deploymentId(), instance.name());
              return new Registration(
                  id,
                  token,
                  row.getOffsetDateTime("lease_expires_at"),
                  row.getInteger("session_lock_objid"));
            });
  }

  /** The instance a bearer token belongs to, whatever its state. */
  public Uni<Caller> authenticate(String token) {
    if (token == null || !token.startsWith(Tokens.PREFIX) || token.length() > 100) {
      return Uni.createFrom().failure(new Unauthorized("an instance token is required"));
    }
    byte[] hash = Tokens.hash(token);
    Caller known = tokens.get(hash);
    if (known != null) {
      return Uni.createFrom().item(known);
    }
    // The token names its instance's database; one it does not know is no instance's.
    Optional<Database> db = databases.named(Tokens.database(token).orElse(Databases.DEFAULT));
    if (db.isEmpty()) {
      return Uni.createFrom().failure(new Unauthorized(InstanceGuards.UNKNOWN_TOKEN));
    }
    return Uni.createFrom()
        .deferred(
            () ->
                db.get()
                    .pool()
                    .preparedQuery(
                        "SELECT id, namespace, deployment_id FROM rollcall.instances WHERE token_hash = $1")
                    .execute(Tuple.of(Buffer.buffer(hash)))
                    .map(
                        rows -> {
                          if (rows.size() == 0) {
                            throw new Unauthorized(InstanceGuards.UNKNOWN_TOKEN);
                          }
                          Row row = rows.iterator().next();
                          Caller caller =
                              new Caller(
                                  row.getUUID("id"),
                                  row.getString("namespace"),
                                  row.getString("deployment_id"));
                          tokens.put(hash, caller);
                          return caller;
                        }));
  }
}
