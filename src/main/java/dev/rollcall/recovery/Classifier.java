package dev.rollcall.recovery;

import dev.rollcall.config.RollcallConfig;
import dev.rollcall.registry.Ownership;
import dev.rollcall.source.RunSource;
import dev.rollcall.source.ScannedRun;
import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.SqlClient;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;

/**
 * Decides what an epoch does with each run, a page at a time, with one set-based query per kind of
 * proof. It skips or defers a run only with positive proof (a live owner, recent activity, a
 * terminal status); everything else is handed out (fail open).
 */
@ApplicationScoped
public class Classifier {

  private final Ownership ownership;
  private final RollcallConfig config;

  Classifier(Ownership ownership, RollcallConfig config) {
    this.ownership = ownership;
    this.config = config;
  }

  /**
   * First look at a scanned page: a run a live instance is executing, or one the engine touched
   * within the activity fence, waits for the re-check; the others are handed out.
   */
  public Uni<List<Verdict>> firstLook(SqlClient client, RunSource source, List<ScannedRun> page) {
    return ownership
        .liveOwners(client, source.namespace(), page.stream().map(ScannedRun::runId).toList())
        .map(
            owners -> {
              List<Verdict> verdicts = new ArrayList<>(page.size());
              for (ScannedRun run : page) {
                if (owners.containsKey(run.runId())) {
                  verdicts.add(
                      Verdict.defer(
                          run.runId(), run.workflowName(), Reason.OWNED_BY_LIVE_INSTANCE));
                } else if (run.recentlyActive()) {
                  verdicts.add(
                      Verdict.defer(run.runId(), run.workflowName(), Reason.RECENTLY_ACTIVE));
                } else {
                  verdicts.add(
                      Verdict.handOut(run.runId(), run.workflowName(), redrive(source, run), null));
                }
              }
              return verdicts;
            });
  }

  /**
   * The re-check of deferred runs before the epoch closes: still owned, still active, or finished
   * runs are skipped for good; the others are handed out.
   */
  public Uni<List<Verdict>> recheck(SqlClient client, RunSource source, List<String> runIds) {
    return source
        .lookup(client, runIds, config.effectiveActivityFence())
        .chain(
            current ->
                ownership
                    .liveOwners(client, source.namespace(), runIds)
                    .map(
                        owners -> {
                          List<Verdict> verdicts = new ArrayList<>(runIds.size());
                          for (String id : runIds) {
                            ScannedRun run = current.get(id);
                            String name = run == null ? null : run.workflowName();
                            if (run == null || !source.isActive(run)) {
                              verdicts.add(Verdict.skip(id, name, Reason.TERMINAL));
                            } else if (owners.containsKey(id)) {
                              verdicts.add(Verdict.skip(id, name, Reason.OWNED_BY_LIVE_INSTANCE));
                            } else if (run.recentlyActive()) {
                              verdicts.add(Verdict.skip(id, name, Reason.RECENTLY_ACTIVE));
                            } else {
                              verdicts.add(Verdict.handOut(id, name, redrive(source, run), null));
                            }
                          }
                          return verdicts;
                        }));
  }

  /**
   * The in-flight runs of a dead instance: handed out as {@code owner-dead} unless they finished or
   * another live instance has taken them up. Recent activity is no proof here: it is the dead
   * owner's own.
   */
  public Uni<List<Verdict>> takeover(
      SqlClient client, RunSource source, List<String> runIds, UUID deadInstanceId) {
    return source
        .lookup(client, runIds, config.effectiveActivityFence())
        .chain(
            current ->
                ownership
                    .liveOwners(client, source.namespace(), runIds)
                    .map(
                        owners ->
                            takeoverVerdicts(source, runIds, current, owners, deadInstanceId)));
  }

  private static List<Verdict> takeoverVerdicts(
      RunSource source,
      List<String> runIds,
      Map<String, ScannedRun> current,
      Map<String, UUID> owners,
      UUID deadInstanceId) {
    List<Verdict> verdicts = new ArrayList<>(runIds.size());
    for (String id : runIds) {
      ScannedRun run = current.get(id);
      String name = run == null ? null : run.workflowName();
      if (run == null || !source.isActive(run)) {
        verdicts.add(Verdict.skip(id, name, Reason.TERMINAL));
      } else if (owners.containsKey(id)) {
        verdicts.add(Verdict.skip(id, name, Reason.OWNED_BY_LIVE_INSTANCE));
      } else {
        verdicts.add(Verdict.handOut(id, name, Reason.OWNER_DEAD, deadInstanceId));
      }
    }
    return verdicts;
  }

  /**
   * Why an unowned, quiet active run is re-driven. The table source does not classify runs: it is
   * {@code pending} when it never started, else {@code unclassified} (fail open).
   */
  private static Reason redrive(RunSource source, ScannedRun run) {
    return source.isPending(run) ? Reason.PENDING : Reason.UNCLASSIFIED;
  }
}
