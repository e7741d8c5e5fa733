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
import org.junit.jupiter.api.Test;

/**
 * The alert rules ship twice, as a rules file and as a PrometheusRule, and each alert has a
 * runbook. What they say is tested by {@code promtool test rules} (.ci/run); what they name, by
 * {@link MetricsContractTest}.
 */
class AlertRulesTest {

  static final Path RULES = Path.of("k8s/monitoring/rollcall-alerts.rules.yaml");
  static final Path MANIFEST = Path.of("k8s/monitoring/prometheusrule.yaml");
  static final Path RUNBOOKS = Path.of("docs/alerts.md");

  @Test
  void thePrometheusRuleManifestHoldsExactlyTheRulesFile() throws IOException {
    YAMLMapper yaml = new YAMLMapper();
    JsonNode rules = yaml.readTree(RULES.toFile());
    JsonNode manifest = yaml.readTree(MANIFEST.toFile());

    assertEquals("PrometheusRule", manifest.get("kind").asText());
    assertEquals(rules, manifest.get("spec"));
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
