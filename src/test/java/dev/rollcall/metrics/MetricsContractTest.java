package dev.rollcall.metrics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLMapper;
import dev.rollcall.recovery.Reaper;
import dev.rollcall.recovery.Retention;
import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Batch;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import dev.rollcall.testing.TimeTravel;
import io.quarkus.test.common.http.TestHTTPResource;
import jakarta.inject.Inject;
import java.io.IOException;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The metrics contract: every metric, label and label value that the shipped alert rules and the
 * Grafana dashboard name is on a real scrape of {@code /q/metrics} after a recovery pass and a
 * death. Renaming a metric or a label in the service breaks this test, not a dashboard in
 * production. An {@code =} matcher's value must be exported; an {@code =~} matcher must match at
 * least one exported value; grouping labels ({@code by}, {@code on}) and legend labels must be on
 * at least one metric of their expression.
 */
@ServiceTest
class MetricsContractTest extends ApiTestBase {

  static final Path RULES = MonitoringManifestsTest.RULES;
  static final Path DASHBOARD = MonitoringManifestsTest.DASHBOARD;

  /** Labels Prometheus adds to every scraped series; {@code up} is its own, never exported. */
  static final Set<String> TARGET_LABELS = Set.of("job", "instance");

  @TestHTTPResource(value = "/", management = true)
  URI management;

  @Inject Reaper reaper;
  @Inject Retention retention;
  @Inject StateGauges gauges;

  @Test
  void everyMetricAndLabelTheAlertRulesAndTheDashboardNameIsExportedAfterAPassAndADeath()
      throws IOException {
    drivePassAndDeath();

    String raw = new Api(management).send("GET", "metrics", null, null).raw();
    // Kept for a reader of a failure: what the service did export.
    Files.writeString(Path.of("target/metrics-contract-scrape.txt"), raw);
    Scrape scrape = Scrape.of(raw);
    List<Named> queries = new ArrayList<>(ruleExpressions());
    queries.addAll(dashboardExpressions());

    assertTrue(queries.size() > 20, "expressions read: " + queries.size());
    List<String> missing = new ArrayList<>();
    for (Named q : queries) {
      missing.addAll(scrape.missing(q));
    }
    assertEquals(List.of(), missing, "named by the rules or the dashboard, not exported");
  }

  /**
   * One boot pass with a batch re-leased after its lease ran out and a stale complete refused; one
   * instance dead by lease expiry and its takeover claimed and closed; one held claim; one
   * retention pass.
   */
  void drivePassAndDeath() {
    String deploy = UUID.randomUUID().toString();
    Instance a = api.register(SourceTables.SMALL, deploy, "a");
    api.heartbeat(a).expect(200);
    Batch first = api.claimBatch(a, 5);
    TimeTravel.batchLeaseExpired(first.id());
    Batch again = api.claimBatch(a, 5);
    assertEquals(first.fence() + 1, again.fence(), "re-leased");
    api.complete(a, first, List.of()).expect(409);
    api.complete(a, again, List.of()).expect(200);
    gauges.refresh().await().indefinitely(); // the boot pass is open
    api.drain(a, 100);

    Instance victim = api.register(SourceTables.SMALL, "next-" + deploy, "victim");
    List<String> inFlight = Db.activeRuns(SourceTables.SMALL).stream().sorted().limit(3).toList();
    api.heartbeat(victim, inFlight).expect(200);
    TimeTravel.leaseExpired(victim);
    reaper.runOnce().await().indefinitely();
    Batch taken = api.claimBatch(a, 100);
    assertEquals("takeover", taken.json().get("epochKind").asText());
    gauges.refresh().await().indefinitely();
    api.complete(a, taken, List.of()).expect(200);
    // An idle claim the service holds a moment: the held-claims gauge.
    api.claimHeld(a, 10, 200, true).expect(200);

    // An instance that left days ago, for retention to delete.
    Instance old = api.register(SourceTables.SMALL, "old-" + deploy, "old");
    api.leave(old).expect(204);
    Db.update(
        "UPDATE rollcall.instances SET ended_at = now() - interval '30 days' WHERE id = ?",
        old.id());
    Db.update(
        "UPDATE rollcall.epochs SET state = 'closed', closed_at = now() - interval '30 days'"
            + " WHERE subject_instance_id = ?",
        old.id());
    Db.update("UPDATE rollcall.housekeeping SET lease_until = '-infinity' WHERE job = 'retention'");
    assertTrue(retention.runOnce().await().indefinitely().ran());
    gauges.refresh().await().indefinitely();
  }

  /** An expression and where it was read. */
  record Named(String where, PromQl query) {}

  static List<Named> ruleExpressions() throws IOException {
    JsonNode rules = new YAMLMapper().readTree(RULES.toFile());
    List<Named> out = new ArrayList<>();
    for (JsonNode group : rules.get("groups")) {
      for (JsonNode rule : group.get("rules")) {
        String name = rule.has("alert") ? rule.get("alert").asText() : rule.get("record").asText();
        out.add(new Named(RULES.getFileName() + " " + name, PromQl.of(rule.get("expr").asText())));
      }
    }
    return out;
  }

  static List<Named> dashboardExpressions() throws IOException {
    JsonNode dashboard = new ObjectMapper().readTree(Files.readString(DASHBOARD));
    List<Named> out = new ArrayList<>();
    for (JsonNode variable : dashboard.path("templating").path("list")) {
      if ("query".equals(variable.path("type").asText())) {
        JsonNode query = variable.get("query");
        String text = query.isObject() ? query.path("query").asText() : query.asText();
        out.add(new Named("dashboard variable " + variable.get("name").asText(), PromQl.of(text)));
      }
    }
    for (JsonNode panel : panels(dashboard)) {
      for (JsonNode target : panel.path("targets")) {
        PromQl q = PromQl.of(target.get("expr").asText());
        // Labels a legend shows must be on a metric of its expression, like grouping labels.
        Matcher legend =
            Pattern.compile("\\{\\{\\s*(\\w+)\\s*}}").matcher(target.path("legendFormat").asText());
        Set<String> labels = new HashSet<>(q.labels());
        while (legend.find()) {
          labels.add(legend.group(1));
        }
        out.add(
            new Named(
                "dashboard panel \"" + panel.get("title").asText() + "\"",
                new PromQl(q.expression(), q.metrics(), q.matchers(), labels)));
      }
    }
    return out;
  }

  static List<JsonNode> panels(JsonNode dashboard) {
    List<JsonNode> out = new ArrayList<>();
    for (JsonNode panel : dashboard.path("panels")) {
      out.add(panel);
      panel.path("panels").forEach(out::add);
    }
    return out;
  }

  /** Every series name of a scrape, with the values each of its labels takes. */
  record Scrape(Map<String, Map<String, Set<String>>> series) {

    private static final Pattern LABEL = Pattern.compile("(\\w+)=\"((?:[^\"\\\\]|\\\\.)*)\"");

    static Scrape of(String text) {
      Map<String, Map<String, Set<String>>> series = new LinkedHashMap<>();
      for (String line : text.split("\n")) {
        if (line.isBlank() || line.startsWith("#")) {
          continue;
        }
        int brace = line.indexOf('{');
        int space = line.indexOf(' ');
        String name = line.substring(0, brace >= 0 && brace < space ? brace : space);
        Map<String, Set<String>> labels = series.computeIfAbsent(name, n -> new HashMap<>());
        if (brace >= 0 && brace < space) {
          Matcher m = LABEL.matcher(line.substring(brace, line.lastIndexOf('}')));
          while (m.find()) {
            labels.computeIfAbsent(m.group(1), l -> new HashSet<>()).add(m.group(2));
          }
        }
      }
      series.put("up", Map.of());
      return new Scrape(series);
    }

    /** What the query names that this scrape does not have, one line each. */
    List<String> missing(Named named) {
      PromQl q = named.query();
      List<String> out = new ArrayList<>();
      Set<String> labelsOfQuery = new HashSet<>(TARGET_LABELS);
      for (String metric : q.metrics()) {
        if (!series.containsKey(metric)) {
          out.add(named.where() + ": metric " + metric);
        } else {
          labelsOfQuery.addAll(series.get(metric).keySet());
        }
      }
      for (PromQl.Matcher m : q.matchers()) {
        if (m.metric() == null || !series.containsKey(m.metric())) {
          continue;
        }
        Set<String> values = series.get(m.metric()).get(m.label());
        String at = named.where() + ": " + m.metric() + "{" + m.label() + m.op() + m.value() + "}";
        if (values == null) {
          if (!TARGET_LABELS.contains(m.label())) {
            out.add(at + " has no label " + m.label());
          }
        } else if (m.value().contains("$")) {
          continue; // a dashboard variable
        } else if (m.op().equals("=") && !values.contains(m.value())) {
          out.add(at + ": no series has " + m.label() + "=\"" + m.value() + "\" " + values);
        } else if (m.op().equals("=~") && values.stream().noneMatch(v -> v.matches(m.value()))) {
          out.add(at + ": no series matches " + values);
        }
      }
      for (String label : q.labels()) {
        // A missing metric is reported above; its labels would only repeat it.
        if (out.isEmpty() && !labelsOfQuery.contains(label)) {
          out.add(named.where() + ": label " + label + " is on none of " + q.metrics());
        }
      }
      return out;
    }
  }

  @Test
  void theScrapeReaderFindsNamesLabelsAndValues() {
    Scrape s =
        Scrape.of(
            "# TYPE x counter\nrollcall_x_total{namespace=\"a\",reason=\"b\"} 1.0\nplain 2\n");
    assertEquals(Set.of("a"), s.series().get("rollcall_x_total").get("namespace"));
    assertTrue(s.series().containsKey("plain"));
    assertFalse(s.missing(new Named("t", PromQl.of("rollcall_x_total{reason=\"c\"}"))).isEmpty());
  }
}
