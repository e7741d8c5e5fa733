package dev.rollcall.metrics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.dataformat.yaml.YAMLMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The alert rules ship twice, as a rules file and as a PrometheusRule, and each alert has a
 * runbook; the dashboard ships twice, as a JSON file and in the ConfigMap Grafana's sidecar loads.
 * What they say is tested by {@code promtool test rules} (.ci/run); what they name, by {@link
 * MetricsContractTest}.
 */
@Tag("unit")
class MonitoringManifestsTest {

  static final Path RULES = Path.of("k8s/monitoring/rollcall-alerts.rules.yaml");
  static final Path MANIFEST = Path.of("k8s/monitoring/prometheusrule.yaml");
  static final Path RUNBOOKS = Path.of("docs/alerts.md");
  static final Path DASHBOARD = Path.of("k8s/monitoring/rollcall-dashboard.json");
  static final Path DASHBOARD_CONFIG_MAP = Path.of("k8s/monitoring/dashboard-configmap.yaml");

  @Test
  void thePrometheusRuleManifestHoldsExactlyTheRulesFile() throws IOException {
    YAMLMapper yaml = new YAMLMapper();
    JsonNode rules = yaml.readTree(RULES.toFile());
    JsonNode manifest = yaml.readTree(MANIFEST.toFile());

    assertEquals("PrometheusRule", manifest.get("kind").asText());
    assertEquals(rules, manifest.get("spec"));
  }

  @Test
  void theDashboardsConfigMapHoldsExactlyTheDashboardAndCarriesTheSidecarsLabel()
      throws IOException {
    JsonNode map = new YAMLMapper().readTree(DASHBOARD_CONFIG_MAP.toFile());

    assertEquals("1", map.at("/metadata/labels/grafana_dashboard").asText());
    assertEquals(Files.readString(DASHBOARD), map.at("/data/rollcall-dashboard.json").asText());
  }

  @Test
  void everyAlertHasARunbookSectionItsAnnotationLinksTo() throws IOException {
    String runbooks = Files.readString(RUNBOOKS);
    List<String> headings = new ArrayList<>();
    Matcher m = Pattern.compile("(?m)^## (\\w+)$").matcher(runbooks);
    while (m.find()) {
      headings.add(m.group(1));
    }
    List<String> alerts = new ArrayList<>();
    for (JsonNode group : new YAMLMapper().readTree(RULES.toFile()).get("groups")) {
      for (JsonNode rule : group.get("rules")) {
        String alert = rule.get("alert").asText();
        alerts.add(alert);
        assertEquals(
            "docs/alerts.md#" + alert.toLowerCase(Locale.ROOT),
            rule.at("/annotations/runbook_url").asText(),
            alert);
        assertTrue(rule.at("/labels/severity").isTextual(), alert + " has no severity");
      }
    }
    assertEquals(alerts, headings, "one runbook section per alert, in the rules' order");
  }
}
