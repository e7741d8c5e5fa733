package dev.rollcall.metrics;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The metric names, label matchers and grouping labels a PromQL expression (or a Grafana {@code
 * label_values(metric, label)} query) names. Not a parser: enough of the grammar to find names in
 * the expressions Rollcall ships, which {@link PromQlTest} pins down.
 */
record PromQl(String expression, Set<String> metrics, List<Matcher> matchers, Set<String> labels) {

  /** {@code label op "value"} inside the braces of a selector of {@code metric}. */
  record Matcher(String metric, String label, String op, String value) {}

  private static final Pattern GROUPING =
      Pattern.compile("\\b(by|without|on|ignoring|group_left|group_right)\\s*\\(([^)]*)\\)");
  private static final Pattern SELECTOR = Pattern.compile("([a-zA-Z_:][\\w:]*)?\\s*\\{([^}]*)}");
  private static final Pattern MATCHER =
      Pattern.compile("([a-zA-Z_]\\w*)\\s*(=~|!~|!=|=)\\s*\"((?:[^\"\\\\]|\\\\.)*)\"");
  private static final Pattern LABEL_VALUES =
      Pattern.compile("label_values\\(\\s*(?:([a-zA-Z_:][\\w:]*)\\s*,\\s*)?([a-zA-Z_]\\w*)\\s*\\)");
  private static final Pattern IDENTIFIER =
      Pattern.compile("(?<![\\w.:$])[a-zA-Z_:][\\w:]*+(?!\\s*\\()");
  private static final Set<String> KEYWORDS =
      Set.of("and", "or", "unless", "bool", "offset", "inf", "nan", "Inf", "NaN");

  static PromQl of(String expression) {
    Set<String> metrics = new LinkedHashSet<>();
    List<Matcher> matchers = new ArrayList<>();
    Set<String> labels = new LinkedHashSet<>();
    java.util.regex.Matcher m = LABEL_VALUES.matcher(expression);
    if (m.find()) {
      if (m.group(1) != null) {
        metrics.add(m.group(1));
        matchers.add(new Matcher(m.group(1), m.group(2), "exists", ""));
      } else {
        labels.add(m.group(2));
      }
      return new PromQl(expression, metrics, matchers, labels);
    }
    StringBuilder rest = new StringBuilder();
    m = GROUPING.matcher(expression);
    while (m.find()) {
      for (String label : m.group(2).split(",")) {
        if (!label.isBlank()) {
          labels.add(label.strip());
        }
      }
      m.appendReplacement(rest, " ");
    }
    m.appendTail(rest);
    String withoutGrouping = rest.toString();
    rest = new StringBuilder();
    m = SELECTOR.matcher(withoutGrouping);
    while (m.find()) {
      String metric = m.group(1);
      java.util.regex.Matcher each = MATCHER.matcher(m.group(2));
      while (each.find()) {
        matchers.add(new Matcher(metric, each.group(1), each.group(2), each.group(3)));
      }
      m.appendReplacement(rest, metric == null ? " " : " " + metric + " ");
    }
    m.appendTail(rest);
    // Ranges and subqueries ([5m], [$__rate_interval]) and string arguments name nothing.
    String bare = rest.toString().replaceAll("\\[[^]]*]", " ").replaceAll("\"[^\"]*\"", " ");
    m = IDENTIFIER.matcher(bare);
    while (m.find()) {
      if (!KEYWORDS.contains(m.group())) {
        metrics.add(m.group());
      }
    }
    return new PromQl(expression, metrics, matchers, labels);
  }
}
