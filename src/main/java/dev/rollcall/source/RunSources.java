package dev.rollcall.source;

import dev.rollcall.config.RollcallConfig;
import dev.rollcall.config.RollcallConfig.NamespaceConfig;
import dev.rollcall.config.RollcallConfig.SourceConfig;
import dev.rollcall.error.Problems.UnknownNamespace;
import dev.rollcall.queue.GraphileQueue;
import io.quarkus.runtime.Startup;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.regex.Pattern;

/**
 * The run source of every configured namespace, built once from configuration. A namespace whose
 * source settings are incomplete or unsafe stops the service at startup with a message naming the
 * key to fix.
 */
@Startup
@ApplicationScoped
public class RunSources {

  /** Namespace names: short, lower-case, usable in metrics labels and URLs. */
  static final Pattern NAMESPACE_NAME = Pattern.compile("[a-z][a-z0-9_-]{0,62}");

  /** The engine's topic namespace rule ({@code world-postgres.md}). */
  static final Pattern TOPIC_NAMESPACE = Pattern.compile("[a-z][a-z0-9]*");

  /** The engine's job prefix: part of graphile task identifiers. */
  static final Pattern JOB_PREFIX = Pattern.compile("[A-Za-z0-9_.:-]{0,64}");

  private final Map<String, RunSource> byNamespace;

  /** Builds every namespace's source from configuration (CDI does this at startup). */
  public RunSources(RollcallConfig config) {
    Map<String, RunSource> sources = new TreeMap<>();
    config.namespaces().forEach((ns, settings) -> sources.put(ns, build(ns, settings)));
    this.byNamespace = Map.copyOf(sources);
  }

  /** The source of a configured namespace, or an {@link UnknownNamespace} refusal. */
  public RunSource get(String namespace) {
    RunSource source = namespace == null ? null : byNamespace.get(namespace);
    if (source == null) {
      throw new UnknownNamespace(String.valueOf(namespace));
    }
    return source;
  }

  /** True when the namespace is configured. */
  public boolean has(String namespace) {
    return namespace != null && byNamespace.containsKey(namespace);
  }

  /** Every configured source, ordered by namespace. */
  public Collection<RunSource> all() {
    return new TreeMap<>(byNamespace).values();
  }

  static RunSource build(String ns, NamespaceConfig settings) {
    if (!NAMESPACE_NAME.matcher(ns).matches()) {
      throw new IllegalStateException(
          "namespace name '" + ns + "' must match " + NAMESPACE_NAME.pattern());
    }
    if (settings.registrationSecret().isBlank()) {
      throw new IllegalStateException(
          "rollcall.namespaces.\"" + ns + "\".registration-secret must not be blank");
    }
    SourceConfig s = settings.source();
    try {
      return switch (s.kind()) {
        case TABLE -> table(ns, s);
        case WORLD_POSTGRES -> worldPostgres(ns, s);
      };
    } catch (IllegalArgumentException e) {
      throw new IllegalStateException(
          "rollcall.namespaces.\"" + ns + "\".source: " + e.getMessage(), e);
    }
  }

  private static RunSource table(String ns, SourceConfig s) {
    List<String> missing = new ArrayList<>();
    String schema = required(s.schema(), "schema", missing);
    String table = required(s.table(), "table", missing);
    String id = required(s.idColumn(), "id-column", missing);
    String status = required(s.statusColumn(), "status-column", missing);
    String name = required(s.nameColumn(), "name-column", missing);
    List<String> active = required(s.activeStatuses(), "active-statuses", missing);
    String template = required(s.queueNameTemplate(), "queue-name-template", missing);
    if (!missing.isEmpty()) {
      throw new IllegalArgumentException(
          "source kind 'table' requires " + String.join(", ", missing));
    }
    Optional<String> pending =
        s.pendingStatus()
            .or(() -> active.contains("pending") ? Optional.of("pending") : Optional.empty());
    return new TableSource(
        ns,
        schema,
        table,
        id,
        status,
        name,
        s.createdAtColumn(),
        s.updatedAtColumn(),
        active,
        pending,
        template,
        Optional.empty(),
        Optional.empty());
  }

  /**
   * The engine's runs table ({@code world-postgres.md}): {@code workflow_runs} with ids that sort
   * by creation, status {@code pending|running} active, queue {@code __wkf_workflow_<name>} or
   * {@code __<ns>_wkf_workflow_<name>} under a topic namespace.
   */
  private static RunSource worldPostgres(String ns, SourceConfig s) {
    String jobPrefix = s.jobPrefix();
    if (!JOB_PREFIX.matcher(jobPrefix).matches()) {
      throw new IllegalArgumentException(
          "job-prefix '" + jobPrefix + "' must match " + JOB_PREFIX.pattern());
    }
    String prefix =
        s.topicNamespace()
            .map(
                topic -> {
                  if (!TOPIC_NAMESPACE.matcher(topic).matches()) {
                    throw new IllegalArgumentException(
                        "topic-namespace '" + topic + "' must match " + TOPIC_NAMESPACE.pattern());
                  }
                  return "__" + topic + "_wkf_workflow_";
                })
            .orElse("__wkf_workflow_");
    TableSource runs =
        new TableSource(
            ns,
            s.schema().orElse("workflow"),
            "workflow_runs",
            "id",
            "status",
            "name",
            Optional.of("created_at"),
            Optional.of("updated_at"),
            List.of("pending", "running"),
            Optional.of("pending"),
            prefix + "{name}",
            Optional.empty(),
            // Newer engine versions record each run's job prefix: used when present.
            Optional.of(new TableSource.RunFilter("job_prefix", jobPrefix)));
    GraphileQueue queue =
        new GraphileQueue(ns, "graphile_worker", List.of(jobPrefix + "flows", jobPrefix + "steps"));
    return new WorldPostgresSource(runs, queue, jobPrefix);
  }

  private static <T> T required(Optional<T> value, String key, List<String> missing) {
    if (value.isEmpty()) {
      missing.add(key);
      return null;
    }
    return value.get();
  }
}
