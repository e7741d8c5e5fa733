package dev.rollcall.e2e;

import dev.rollcall.bench.Latencies;
import dev.rollcall.e2e.EndToEndIT.Cluster;
import dev.rollcall.e2e.EndToEndIT.Measurement;
import dev.rollcall.testing.TestDatabase;
import java.util.List;

/**
 * What Rollcall's tables and the engine's say after a scenario of the end-to-end suites, read by
 * the database's clock: deaths of live processes, deaths by proof, when runs completed.
 */
final class Outcomes {

  static final String NAMESPACE = RollcallServices.NAMESPACE;

  private Outcomes() {}

  /**
   * Instances declared dead since {@code since} whose replica is alive: a death of a live process.
   */
  static List<String> liveDeclaredDead(TestDatabase db, Cluster cluster, String since) {
    List<String> alive =
        cluster.all.stream()
            .filter(r -> r.process().isAlive())
            .map(ExampleApp.Replica::name)
            .toList();
    return db.column(
        "SELECT name || ' (' || coalesce(end_reason, '') || ')' FROM rollcall.instances"
            + " WHERE namespace = ? AND state = 'dead' AND ended_at >= ?::timestamptz"
            + " AND name = ANY(?)",
        NAMESPACE,
        since,
        alive.toArray(String[]::new));
  }

  /**
   * For each run, ms from {@code at} until it completed or reached its hook, whichever came first
   * (this harness resumes hooks later), the runs that did neither left out; sorted.
   */
  static List<Long> sinceReturn(TestDatabase db, List<String> runs, String at) {
    return db
        .column(
            // The earlier of the two: a run at its hook completes only once this harness
            // resumes the hook, after the measurement.
            "SELECT round(extract(epoch FROM least(r.completed_at,"
                + "   (SELECT min(e.created_at) FROM workflow.workflow_events e"
                + "    WHERE e.run_id = r.id AND e.type = 'hook_created'))"
                + " - ?::timestamptz::timestamp) * 1000)::bigint::text"
                + " FROM workflow.workflow_runs r WHERE r.id = ANY(?)"
                + " AND (r.completed_at IS NOT NULL OR EXISTS (SELECT 1"
                + "   FROM workflow.workflow_events e WHERE e.run_id = r.id"
                + "   AND e.type = 'hook_created'))",
            at,
            (Object) runs.toArray(String[]::new))
        .stream()
        .map(Long::parseLong)
        .sorted()
        .toList();
  }

  /** The database's clock, as text a later statement reads back as {@code timestamptz}. */
  static String now(TestDatabase db) {
    return db.column("SELECT now()::text").get(0);
  }

  static String triple(List<Long> sorted) {
    if (sorted.isEmpty()) {
      return "–";
    }
    return Measurement.seconds(Latencies.percentile(sorted, 0.5))
        + " / "
        + Measurement.seconds(Latencies.percentile(sorted, 0.99))
        + " / "
        + Measurement.seconds(sorted.get(sorted.size() - 1));
  }

  /** Instances of the suite's namespace declared dead since {@code since}, counted by proof. */
  static List<List<String>> deathsByProof(TestDatabase db, String since) {
    return db.rows(
        "SELECT coalesce(end_reason, '-'), count(*)::text FROM rollcall.instances"
            + " WHERE namespace = ? AND state = 'dead' AND ended_at >= ?::timestamptz"
            + " GROUP BY 1 ORDER BY 1",
        NAMESPACE,
        since);
  }
}
