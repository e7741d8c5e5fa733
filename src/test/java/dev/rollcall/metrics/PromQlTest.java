package dev.rollcall.metrics;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

@Tag("unit")
class PromQlTest {

  @Test
  void findsTheMetricsTheMatchersAndTheGroupingLabelsOfAnExpression() {
    PromQl q =
        PromQl.of(
            "sum by (namespace) (increase(rollcall_runs_total{verdict=\"handed-out\","
                + " reason=~\"a|b\"}[15m])) > 0\n and on (namespace) max by (namespace)"
                + " (rollcall_namespace_info{classifies=\"true\"}) unless absent(up == 1)");

    assertEquals(Set.of("rollcall_runs_total", "rollcall_namespace_info", "up"), q.metrics());
    assertEquals(
        List.of(
            new PromQl.Matcher("rollcall_runs_total", "verdict", "=", "handed-out"),
            new PromQl.Matcher("rollcall_runs_total", "reason", "=~", "a|b"),
            new PromQl.Matcher("rollcall_namespace_info", "classifies", "=", "true")),
        q.matchers());
    assertEquals(Set.of("namespace"), q.labels());
  }

  @Test
  void readsHistogramQuantilesAndGrafanaVariablesWithoutTakingNumbersOrFunctionsForMetrics() {
    PromQl q =
        PromQl.of(
            "histogram_quantile(0.99, sum by (le, namespace)"
                + " (rate(rollcall_claim_seconds_bucket{namespace=~\"$namespace\"}"
                + "[$__rate_interval]))) > 1e3");

    assertEquals(Set.of("rollcall_claim_seconds_bucket"), q.metrics());
    assertEquals(Set.of("le", "namespace"), q.labels());
  }

  @Test
  void readsAGrafanaLabelValuesQuery() {
    PromQl q = PromQl.of("label_values(rollcall_namespace_info, namespace)");

    assertEquals(Set.of("rollcall_namespace_info"), q.metrics());
    assertEquals(
        List.of(new PromQl.Matcher("rollcall_namespace_info", "namespace", "exists", "")),
        q.matchers());
  }
}
