package dev.rollcall.queue;

import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.testing.Plans;
import dev.rollcall.testing.ServiceTest;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Test;

/**
 * A leave or a death of an instance that named no queue worker, had none learned and reported no
 * message reads no job: the queue may hold every job of a deploy's recovery (100 000 and more), and
 * a scan of it took 450 ms of PostgreSQL's time per leave in the recovery benchmark. The plans are
 * checked as PostgreSQL runs them, with a queue of jobs to read.
 */
@ServiceTest
class GraphileQueuePlanTest {

  private final GraphileQueue queue =
      new GraphileQueue("small", "graphile_worker", List.of("workflow_flows", "workflow_steps"));

  @Test
  void releasingTheLocksOfAnInstanceWithoutWorkersReadsNoJob() throws Exception {
    for (String plan :
        explain(
            queue.releaseTargetSql(),
            "text[], text[], uuid, text",
            "'{}', '{workflow_flows,workflow_steps}', '" + UUID.randomUUID() + "', 'small'")) {
      assertTrue(plan.contains("One-Time Filter"), plan);
      assertTrue(jobsNeverRead(plan), plan);
    }
  }

  @Test
  void learningTheWorkersOfAnInstanceThatReportedNoMessageReadsNoJob() throws Exception {
    for (String plan :
        explain(
            queue.learnAtDeathSql(),
            "uuid, text, text[]",
            "'" + UUID.randomUUID() + "', 'small', '{workflow_flows,workflow_steps}'")) {
      assertTrue(plan.contains("One-Time Filter"), plan);
      assertTrue(jobsNeverRead(plan), plan);
    }
  }

  /** Every node that reads graphile's jobs table says "never executed". */
  private static boolean jobsNeverRead(String plan) {
    return plan.lines()
        .filter(l -> l.contains("_private_jobs j"))
        .allMatch(l -> l.contains("never executed"));
  }

  /** The plan for these arguments and the generic plan (both kept by a pooled connection). */
  private static List<String> explain(String sql, String types, String args) throws Exception {
    // A queue to read: without jobs the planner may skip the scan for reasons of its own.
    return Plans.explainAsCached(1000, st -> {}, sql, types, args);
  }
}
