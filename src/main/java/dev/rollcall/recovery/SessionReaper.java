package dev.rollcall.recovery;

import dev.rollcall.config.RollcallConfig;
import dev.rollcall.registry.SessionLiveness;
import dev.rollcall.registry.SessionLiveness.Rules;
import io.quarkus.scheduler.Scheduled;
import io.smallrye.mutiny.Uni;
import jakarta.enterprise.context.ApplicationScoped;

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

  SessionReaper(SessionLiveness sessions, Reaper reaper, RollcallConfig config) {
    this.sessions = sessions;
    this.reaper = reaper;
    this.config = config;
  }

  @Scheduled(
      identity = "rollcall-session-reaper",
      every = "${rollcall.liveness.check-interval:250ms}",
      concurrentExecution = Scheduled.ConcurrentExecution.SKIP)
  Uni<Void> scheduled() {
    return Reaper.survive(runOnce(), "session check");
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
