package dev.rollcall.source;

import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.testing.Plans;
import dev.rollcall.testing.ServiceTest;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The torn-step check of a pass's hand-outs reads a run's row only for a step it finds torn: a
 * completed step with its {@code step_completed} event (every finished step of a healthy run) costs
 * no read of the runs table, which a pass reads once per run already.
 */
@ServiceTest
class TornCheckPlanTest {

  private static final String OLD = "(now() AT TIME ZONE 'UTC') - interval '1 hour'";

  @Test
  void completedStepsWithTheirEventsReadNoRunRow() throws Exception {
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
    Matcher runs =
        Pattern.compile("workflow_runs r[^\\n]*\\((never executed|actual [^)]*loops=(\\d+))")
            .matcher(plan);
    assertTrue(runs.find(), plan);
    assertTrue(
        runs.group(1).equals("never executed") || "0".equals(runs.group(2)),
        "the runs table is read for steps that are not torn:\n" + plan);
  }
}
