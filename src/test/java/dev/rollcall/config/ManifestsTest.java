package dev.rollcall.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.MappingIterator;
import com.fasterxml.jackson.dataformat.yaml.YAMLMapper;
import io.smallrye.config.ConfigMapping;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The Kubernetes manifests say only what their readers read: every variable the example application
 * sets is one the world module (or the SDK) reads, every variable the module requires is set, and
 * every Rollcall setting of the ConfigMap and the Secret is a key of {@link RollcallConfig}. What
 * the module reads is taken from its source, so renaming a variable on either side fails here.
 */
@Tag("unit")
class ManifestsTest {

  static final Path K8S = Path.of("k8s");
  static final Path CLIENT_SOURCES = Path.of("clients", "node", "src");

  /** Read by the Workflow SDK, not the module: which world module to load. */
  static final String TARGET_WORLD = "WORKFLOW_TARGET_WORLD";

  static final String WORLD_MODULE = "@rollcall/client/world";

  static final YAMLMapper YAML = new YAMLMapper();

  /** The documents of one manifest file. */
  static List<JsonNode> documents(Path file) throws IOException {
    List<JsonNode> docs = new ArrayList<>();
    try (MappingIterator<JsonNode> it = YAML.readerFor(JsonNode.class).readValues(file.toFile())) {
      while (it.hasNext()) {
        JsonNode doc = it.next();
        if (doc != null && !doc.isMissingNode() && !doc.isNull()) {
          docs.add(doc);
        }
      }
    }
    return docs;
  }

  static JsonNode only(String file, String kind) throws IOException {
    List<JsonNode> docs =
        documents(K8S.resolve(file)).stream()
            .filter(d -> kind.equals(d.path("kind").asText()))
            .toList();
    assertEquals(1, docs.size(), file + ": one " + kind);
    return docs.get(0);
  }

  /** The variables the world module reads, from its source: {@code env.X}, {@code env[...]}. */
  static WorldVariables worldVariables() throws IOException {
    Pattern read = Pattern.compile("\\benv\\.([A-Z][A-Z0-9_]*)\\b");
    Pattern required = Pattern.compile("\\brequired\\('([A-Z][A-Z0-9_]*)'\\)");
    Set<String> all = new TreeSet<>();
    Set<String> needed = new TreeSet<>();
    try (Stream<Path> files = Files.list(CLIENT_SOURCES)) {
      for (Path file : files.filter(f -> f.toString().endsWith(".js")).sorted().toList()) {
        String source = Files.readString(file);
        Matcher m = read.matcher(source);
        while (m.find()) {
          all.add(m.group(1));
        }
        Matcher r = required.matcher(source);
        while (r.find()) {
          needed.add(r.group(1));
        }
      }
    }
    all.addAll(needed);
    return new WorldVariables(all, needed);
  }

  record WorldVariables(Set<String> read, Set<String> required) {}

  /** The example application's container variables: name to value (or its reference). */
  static Map<String, JsonNode> exampleEnv() throws IOException {
    JsonNode deployment = only("example-app.yaml", "Deployment");
    Map<String, JsonNode> env = new LinkedHashMap<>();
    for (JsonNode container :
        deployment.path("spec").path("template").path("spec").path("containers")) {
      for (JsonNode var : container.path("env")) {
        env.put(var.path("name").asText(), var);
      }
    }
    return env;
  }

  @Test
  void everyManifestParsesAndNamesItsKind() throws IOException {
    try (Stream<Path> files = Files.list(K8S)) {
      for (Path file : files.filter(f -> f.toString().endsWith(".yaml")).sorted().toList()) {
        List<JsonNode> docs = documents(file);
        assertTrue(!docs.isEmpty(), file + " holds no document");
        for (JsonNode doc : docs) {
          assertTrue(doc.hasNonNull("apiVersion") && doc.hasNonNull("kind"), file + ": " + doc);
        }
      }
    }
    for (JsonNode resource : only("kustomization.yaml", "Kustomization").path("resources")) {
      assertTrue(Files.exists(K8S.resolve(resource.asText())), "kustomization lists " + resource);
    }
  }

  @Test
  void theWorldModuleReadsWhatItsSourceSays() throws IOException {
    WorldVariables world = worldVariables();
    // The reading itself must find something, or every check below would pass on nothing.
    assertTrue(world.required().contains("ROLLCALL_URL"), world.toString());
    assertTrue(world.read().contains("ROLLCALL_NAME"), world.toString());
  }

  @Test
  void theExampleApplicationSetsOnlyVariablesThatAreReadAndEveryOneThatIsRequired()
      throws IOException {
    WorldVariables world = worldVariables();
    Map<String, JsonNode> env = exampleEnv();
    List<String> unread = new ArrayList<>();
    for (String name : env.keySet()) {
      if (!name.equals(TARGET_WORLD) && !world.read().contains(name)) {
        unread.add(name);
      }
    }
    assertEquals(List.of(), unread, "set by k8s/example-app.yaml, read by no one " + world.read());
    List<String> missing = new ArrayList<>(world.required());
    missing.removeAll(env.keySet());
    assertEquals(List.of(), missing, "required by the world module, not set by the example");
    assertEquals(
        WORLD_MODULE,
        env.getOrDefault(TARGET_WORLD, YAML.createObjectNode()).path("value").asText(),
        "the example must select the world module: without it, no Rollcall at all");
  }

  @Test
  void theExampleApplicationPointsAtANamespaceTheServiceConfiguresWithItsSecretAndJobPrefix()
      throws IOException {
    Map<String, JsonNode> env = exampleEnv();
    Map<String, String> config = data(only("configmap.yaml", "ConfigMap"), "data");
    Map<String, String> secrets = data(only("secret.yaml", "Secret"), "stringData");
    String ns = set(env, "ROLLCALL_NAMESPACE").path("value").asText();
    String nsEnv = "ROLLCALL_NAMESPACES__" + ns.toUpperCase().replaceAll("[^A-Z0-9]", "_") + "__";
    assertTrue(config.containsKey(nsEnv + "SOURCE_KIND"), nsEnv + "SOURCE_KIND in configmap.yaml");

    JsonNode secretRef = set(env, "ROLLCALL_SECRET").path("valueFrom").path("secretKeyRef");
    assertEquals(
        only("secret.yaml", "Secret").path("metadata").path("name").asText(),
        secretRef.path("name").asText());
    assertEquals(nsEnv + "REGISTRATION_SECRET", secretRef.path("key").asText());
    assertTrue(secrets.containsKey(secretRef.path("key").asText()), "the key is in secret.yaml");

    JsonNode deploymentId = set(env, "ROLLCALL_DEPLOYMENT_ID").path("valueFrom").path("fieldRef");
    assertEquals("metadata.labels['pod-template-hash']", deploymentId.path("fieldPath").asText());

    String prefix = config.getOrDefault(nsEnv + "SOURCE_JOB_PREFIX", "workflow_");
    JsonNode appPrefix = env.get("WORKFLOW_POSTGRES_JOB_PREFIX");
    assertEquals(prefix, appPrefix == null ? "workflow_" : appPrefix.path("value").asText());
  }

  @Test
  void everyRollcallSettingOfTheConfigMapAndTheSecretIsAKeyOfTheConfiguration() throws IOException {
    JsonNode configMap = only("configmap.yaml", "ConfigMap");
    JsonNode secret = only("secret.yaml", "Secret");
    Map<String, String> settings = new TreeMap<>(data(configMap, "data"));
    settings.putAll(data(secret, "stringData"));

    Map<String, String> declared = new TreeMap<>();
    String prefix = RollcallConfig.class.getAnnotation(ConfigMapping.class).prefix();
    ConfigDocumentationTest.walk(RollcallConfig.class, prefix, declared);
    List<Pattern> keys = declared.keySet().stream().map(ManifestsTest::envPattern).toList();

    List<String> unknown = new ArrayList<>();
    Map<String, Set<String>> namespaces = new TreeMap<>();
    Pattern nsSetting = Pattern.compile("ROLLCALL_NAMESPACES__([A-Z0-9_]+)__(.+)");
    for (String name : settings.keySet()) {
      if (name.startsWith("QUARKUS_")) {
        continue; // Quarkus' own settings: the database and the management interface
      }
      if (!name.startsWith("ROLLCALL_")
          || keys.stream().noneMatch(k -> k.matcher(name).matches())) {
        unknown.add(name);
      }
      Matcher ns = nsSetting.matcher(name);
      if (ns.matches()) {
        namespaces.computeIfAbsent(ns.group(1), n -> new TreeSet<>()).add(ns.group(2));
      }
    }
    assertEquals(List.of(), unknown, "settings that map onto no key of RollcallConfig");
    assertTrue(!namespaces.isEmpty(), "the manifests configure a namespace");
    namespaces.forEach(
        (ns, keysOfNs) ->
            assertTrue(
                keysOfNs.containsAll(List.of("REGISTRATION_SECRET", "SOURCE_KIND")),
                "namespace " + ns + " needs its registration secret and source kind: " + keysOfNs));
    for (String database :
        List.of(
            "QUARKUS_DATASOURCE_JDBC_URL",
            "QUARKUS_DATASOURCE_REACTIVE_URL",
            "QUARKUS_DATASOURCE_USERNAME",
            "QUARKUS_DATASOURCE_PASSWORD")) {
      assertTrue(
          settings.containsKey(database), database + ": without it the service refuses to start");
    }

    JsonNode container =
        only("deployment.yaml", "Deployment")
            .path("spec")
            .path("template")
            .path("spec")
            .path("containers")
            .get(0);
    Set<String> from = new TreeSet<>();
    for (JsonNode source : container.path("envFrom")) {
      source.fields().forEachRemaining(e -> from.add(e.getValue().path("name").asText()));
    }
    assertEquals(
        new TreeSet<>(
            List.of(
                configMap.path("metadata").path("name").asText(),
                secret.path("metadata").path("name").asText())),
        from,
        "the service reads the ConfigMap and the Secret");
  }

  static JsonNode set(Map<String, JsonNode> env, String name) {
    JsonNode var = env.get(name);
    assertTrue(var != null, "k8s/example-app.yaml does not set " + name);
    return var;
  }

  static Map<String, String> data(JsonNode resource, String field) {
    Map<String, String> data = new TreeMap<>();
    resource
        .path(field)
        .fields()
        .forEachRemaining(e -> data.put(e.getKey(), e.getValue().asText()));
    return data;
  }

  /**
   * The environment variable(s) of a configuration key, as SmallRye Config maps them: upper case,
   * every other character {@code _}, a map key between {@code __}.
   */
  static Pattern envPattern(String key) {
    String[] parts = key.split(Pattern.quote(".\"<ns>\"."), -1);
    StringBuilder regex = new StringBuilder();
    for (int i = 0; i < parts.length; i++) {
      if (i > 0) {
        regex.append("__[A-Z0-9_]+__");
      }
      regex.append(Pattern.quote(parts[i].toUpperCase().replaceAll("[^A-Z0-9]", "_")));
    }
    return Pattern.compile(regex.toString());
  }
}
