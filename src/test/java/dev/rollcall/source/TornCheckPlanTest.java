package dev.rollcall.source;

import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.testing.Plans;
import dev.rollcall.testing.ServiceTest;
import org.junit.jupiter.api.Test;

/**
 * The torn-step check of a pass's hand-outs joins the runs table to the steps it finds torn: a
 * completed step with its {@code step_completed} event (every finished step of a healthy run) costs
 * no read of its run, which a pass has read once already. Joined beneath the search, as it was, the
 * check read a fifth more runs rows than the pass in the benchmark's mix.
 */
@ServiceTest
class TornCheckPlanTest {

  private static final String OLD = "(now() AT TIME ZONE 'UTC') - interval '1 hour'";

  @Test
  void theRunsAreJoinedToTheTornStepsNotReadForEveryCompletedStep() throws Exception {
    WorldPostgresTears tears =
        new WorldPostgresTears("\"workflow\"", new String[] {"workflow_flows"}, "workflow_steps");
    String plan =
        Plans.explain(
            0,
            st -> {
              st.execute(
                  "INSERT INTO workflow.workflow_runs (id, deployment_id, status, name, created_at,"
                      + " updated_at, execution_context) SELECT 'wrun_plan_' || n, 'p',"
                      + " 'running'::workflow.status, 'workflow//./f//run', "
                      + OLD
                      + ", "
                      + OLD
                      + ", '{}'::jsonb FROM generate_series(1, 500) n");
              st.execute(
                  "INSERT INTO workflow.workflow_steps (run_id, step_id, step_name, status, attempt,"
                      + " created_at, updated_at, completed_at) SELECT 'wrun_plan_' || n,"
                      + " 'step_plan_' || n, 'step//charge', 'completed', 1, "
                      + OLD
                      + ", "
                      + OLD
                      + ", "
                      + OLD
                      + " FROM generate_series(1, 500) n");
              st.execute(
                  "INSERT INTO workflow.workflow_events (id, type, correlation_id, created_at,"
                      + " run_id) SELECT 'wevt_plan_' || n || '_' || e.k, e.type, 'step_plan_' || n, "
                      + OLD
                      + ", 'wrun_plan_' || n FROM generate_series(1, 500) n CROSS JOIN (VALUES"
                      + " (1, 'step_started'), (2, 'step_completed')) AS e(k, type)");
              // Planned as in a database whose statistics know its rows.
              st.execute(
                  "ANALYZE workflow.workflow_runs, workflow.workflow_steps, workflow.workflow_events");
            },
            tears.tornStepsSql(false, true),
            "text[]",
            java.util.stream.IntStream.rangeClosed(1, 500)
                .mapToObj(n -> "'wrun_plan_" + n + "'")
                .collect(java.util.stream.Collectors.joining(",", "ARRAY[", "]")));
    // Whatever the join PostgreSQL picks for these sizes, the runs table is joined to the
    // subquery that finds the torn steps, never read beneath it: it is read for the torn steps
    // (a nested loop) or once (a hash join), not for every completed step of the hand-outs.
    String[] lines = plan.split("\n");
    int subquery = indexOf(lines, "Subquery Scan on s ");
    int antiJoin = indexOf(lines, "Anti Join");
    int runs = indexOf(lines, " on workflow_runs r");
    assertTrue(subquery >= 0 && antiJoin > subquery && runs >= 0, plan);
    assertTrue(
        indent(lines[antiJoin]) > indent(lines[subquery]),
        "the torn steps are found inside the subquery:\n" + plan);
    assertTrue(
        indent(lines[runs]) <= indent(lines[subquery]),
        "the runs table is read beneath the search for torn steps:\n" + plan);
  }

  private static int indexOf(String[] lines, String part) {
    for (int i = 0; i < lines.length; i++) {
      if (lines[i].contains(part)) {
        return i;
      }
    }
    return -1;
  }

  private static int indent(String line) {
    return line.length() - line.stripLeading().length();
  }
}
