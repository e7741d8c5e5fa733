package dev.rollcall.recovery;

import dev.rollcall.config.RollcallConfig;
import dev.rollcall.registry.SessionLiveness;
import dev.rollcall.registry.SessionLiveness.Rules;
import io.quarkus.runtime.ShutdownEvent;
import io.quarkus.runtime.StartupEvent;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.core.Vertx;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.event.Observes;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The fast path of the reaper: every {@code rollcall.liveness.check-interval}, instances whose
 * session lock is gone ({@link SessionLiveness}) are declared dead with proof {@code session-lost}
 * and their takeover opened, by the reaper's own per-instance transaction. A check whose query
 * fails decides nothing (Rollcall's own connection trouble is never evidence); several service
 * replicas may check at once, and the guarded death statement lets one win each instance.
 */
@ApplicationScoped
public class SessionReaper {

  private final SessionLiveness sessions;
  private final Reaper reaper;
  private final RollcallConfig config;
  private final Vertx vertx;
  private final AtomicBoolean running = new AtomicBoolean();
  private long timer = -1;

  SessionReaper(SessionLiveness sessions, Reaper reaper, RollcallConfig config, Vertx vertx) {
    this.vertx = vertx;
    this.sessions = sessions;
    this.reaper = reaper;
    this.config = config;
  }

  /**
   * Starts the periodic check. A Vert.x timer, not {@code @Scheduled}: Quarkus' scheduler fires an
   * {@code every} shorter than one second only once a second, which would cost up to a second of
   * detection.
   */
  void start(@Observes StartupEvent started) {
    config
        .liveness()
        .checkEvery()
        .ifPresent(every -> timer = vertx.setPeriodic(every.toMillis(), id -> tick()));
  }

  void stop(@Observes ShutdownEvent stopping) {
    if (timer >= 0) {
      vertx.cancelTimer(timer);
    }
  }

  /** One check at a time in this replica: a tick that finds one running is skipped. */
  private void tick() {
    if (!running.compareAndSet(false, true)) {
      return;
    }
    Housekeeping.survive(runOnce(), "session check")
        .subscribe()
        .with(ignored -> running.set(false), failure -> running.set(false));
  }

  /** One check with the rules in force. */
  public Uni<Reaper.Pass> runOnce() {
    return runOnce(Rules.of(config));
  }

  /** One check with the given rules: tests call it directly instead of waiting for the schedule. */
  public Uni<Reaper.Pass> runOnce(Rules rules) {
    return sessions
        .check(rules, Reaper.PER_PASS)
        .chain(
            check ->
                reaper.reapEach(
                    check.lost(),
                    Reaper.Proof.SESSION_LOST,
                    (conn, id) -> sessions.markDeadIfSessionLost(conn, id, rules)));
  }
}
