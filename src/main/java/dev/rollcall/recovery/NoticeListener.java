package dev.rollcall.recovery;

import dev.rollcall.database.Database;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.core.Vertx;
import io.vertx.mutiny.pgclient.PgConnection;
import io.vertx.mutiny.sqlclient.SqlConnection;
import java.util.concurrent.CompletableFuture;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;
import org.jboss.logging.Logger;

/**
 * The listening connection of one database ({@link Wakeups}), taken from its pool and kept. When it
 * is lost, every waiting claim of the database's namespaces is woken (a notice may have been
 * missed) and it listens again; a database that cannot be reached is tried again every second (its
 * first failure logged, the others only once it listens again).
 */
final class NoticeListener {

  private static final Logger LOG = Logger.getLogger(NoticeListener.class);

  private final Database db;
  private final Vertx vertx;
  private final Consumer<String> notice;
  private final Runnable wakeItsNamespaces;
  private final BooleanSupplier stopped;
  private volatile SqlConnection listening;
  private volatile CompletableFuture<Void> listeningNow = new CompletableFuture<>();
  private volatile boolean failing;

  /**
   * Listens on {@code db} for {@code notice}s; {@code wakeItsNamespaces} when a notice may have
   * been missed; no more once {@code stopped}.
   */
  NoticeListener(
      Database db,
      Vertx vertx,
      Consumer<String> notice,
      Runnable wakeItsNamespaces,
      BooleanSupplier stopped) {
    this.db = db;
    this.vertx = vertx;
    this.notice = notice;
    this.wakeItsNamespaces = wakeItsNamespaces;
    this.stopped = stopped;
  }

  /** Completes once it listens (again, after a lost connection). */
  CompletableFuture<Void> listening() {
    return listeningNow;
  }

  void close() {
    SqlConnection conn = listening;
    if (conn != null) {
      conn.closeAndForget();
    }
  }

  void listen() {
    if (stopped.getAsBoolean()) {
      return;
    }
    Uni.createFrom()
        .deferred(() -> db.pool().getConnection())
        .call(conn -> conn.query("LISTEN " + Wakeups.CHANNEL).execute().replaceWith(conn))
        .subscribe()
        .with(
            conn -> {
              listening = conn;
              PgConnection pg = PgConnection.cast(conn);
              pg.notificationHandler(n -> notice.accept(n.getPayload()));
              pg.closeHandler(
                  () -> {
                    listening = null;
                    listeningNow = new CompletableFuture<>();
                    if (!stopped.getAsBoolean()) {
                      LOG.warnf(
                          "the notice listener's connection to %s closed; listening again", db);
                      wakeItsNamespaces.run();
                      vertx.setTimer(1000, id -> listen());
                    }
                  });
              listeningNow.complete(null);
              if (failing) {
                failing = false;
                LOG.infof("listening on %s in %s again", Wakeups.CHANNEL, db);
              }
              LOG.debugf("listening on %s in %s", Wakeups.CHANNEL, db);
            },
            e -> {
              if (!stopped.getAsBoolean()) {
                if (!failing) {
                  failing = true;
                  LOG.warnf(
                      "listening on %s in %s failed, retrying every second: %s",
                      Wakeups.CHANNEL, db, e.getMessage());
                }
                wakeItsNamespaces.run();
                vertx.setTimer(1000, id -> listen());
              }
            });
  }
}
