package dev.rollcall.database;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.config.RollcallConfig;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The configuration example of docs/databases.md is one the service accepts: every key is in the
 * configuration reference, and its namespaces and databases make a plan, with URLs it can open.
 */
@Tag("unit")
class DatabasesDocTest {

  private static final Pattern QUOTED =
      Pattern.compile("^(rollcall\\.(namespaces|databases))\\.\"([^\"]+)\"\\.(.+)$");

  @Test
  void theExampleConfigurationIsOneTheServiceAccepts() throws IOException {
    Map<String, String> example = example();
    Set<String> documented = documentedKeys();
    Map<String, Optional<String>> wanted = new TreeMap<>();
    Map<String, Map<String, String>> databases = new TreeMap<>();
    for (Map.Entry<String, String> e : example.entrySet()) {
      if (!e.getKey().startsWith("rollcall.")) {
        continue;
      }
      Matcher m = QUOTED.matcher(e.getKey());
      assertTrue(m.matches(), e.getKey());
      String generic =
          m.group(1)
              + ".\"<"
              + (m.group(2).equals("databases") ? "db" : "ns")
              + ">\"."
              + m.group(4);
      assertTrue(documented.contains(generic), generic + " is in docs/operations.md");
      if (m.group(2).equals("namespaces")) {
        wanted.putIfAbsent(m.group(3), Optional.empty());
        if (m.group(4).equals("database")) {
          wanted.put(m.group(3), Optional.of(e.getValue()));
        }
      } else {
        databases.computeIfAbsent(m.group(3), k -> new TreeMap<>()).put(m.group(4), e.getValue());
      }
    }
    Map<String, List<String>> plan = Databases.plan(wanted, databases.keySet());
    assertEquals(List.of("shop"), plan.get("default"));
    assertEquals(List.of("billing"), plan.get("billing"));
    databases.forEach(
        (name, settings) -> {
          Databases.Connection c = Databases.Connection.of(name, settings(settings));
          assertEquals("billing-db", c.reactive().getHost());
          assertEquals("rollcall", c.reactive().getUser());
          assertEquals("jdbc:postgresql://billing-db:5432/billing?connectTimeout=5", c.jdbcUrl());
        });
  }

  /** The properties block of docs/databases.md, key by key. */
  private static Map<String, String> example() throws IOException {
    List<String> lines = Files.readAllLines(Path.of("docs", "databases.md"));
    int start = lines.indexOf("```properties");
    assertTrue(start >= 0, "a properties block");
    Map<String, String> out = new TreeMap<>();
    for (String line : lines.subList(start + 1, lines.size())) {
      if (line.equals("```")) {
        break;
      }
      if (line.isBlank() || line.startsWith("#")) {
        continue;
      }
      int eq = line.indexOf('=');
      out.put(line.substring(0, eq), line.substring(eq + 1));
    }
    return out;
  }

  /** The keys of the configuration reference's table. */
  private static Set<String> documentedKeys() throws IOException {
    Set<String> keys = new TreeSet<>();
    for (String line : Files.readAllLines(Path.of("docs", "operations.md"))) {
      if (line.startsWith("| `rollcall.")) {
        keys.add(line.split("\\|")[1].trim().replace("`", ""));
      }
    }
    return keys;
  }

  private static RollcallConfig.DatabaseConfig settings(Map<String, String> s) {
    List<String> unknown = new ArrayList<>(s.keySet());
    unknown.removeAll(List.of("url", "username", "password", "max-size"));
    assertEquals(List.of(), unknown);
    return new RollcallConfig.DatabaseConfig() {
      @Override
      public String url() {
        return s.get("url");
      }

      @Override
      public Optional<String> username() {
        return Optional.ofNullable(s.get("username"));
      }

      @Override
      public Optional<String> password() {
        return Optional.ofNullable(s.get("password"));
      }

      @Override
      public int maxSize() {
        return Integer.parseInt(s.getOrDefault("max-size", "20"));
      }
    };
  }
}
