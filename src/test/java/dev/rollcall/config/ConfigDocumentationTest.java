package dev.rollcall.config;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.smallrye.config.ConfigMapping;
import io.smallrye.config.WithDefault;
import java.io.IOException;
import java.lang.reflect.Method;
import java.lang.reflect.ParameterizedType;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The configuration reference (docs/operations.md) lists every key of {@link RollcallConfig}, with
 * its default.
 */
@Tag("unit")
class ConfigDocumentationTest {

  /** The page that holds the configuration table. */
  static final Path REFERENCE = Path.of("docs", "operations.md");

  @Test
  void theConfigurationReferenceDocumentsEveryKeyAndEveryDefault() throws IOException {
    Map<String, String> documented = new TreeMap<>();
    for (String line : Files.readAllLines(REFERENCE)) {
      if (line.startsWith("| `rollcall.")) {
        String[] cells = line.split("\\|");
        documented.put(strip(cells[1]), strip(cells[2]));
      }
    }
    Map<String, String> declared = new TreeMap<>();
    String prefix = RollcallConfig.class.getAnnotation(ConfigMapping.class).prefix();
    walk(RollcallConfig.class, prefix, declared);

    assertEquals(declared.keySet(), documented.keySet(), "keys in the table of " + REFERENCE);
    List<String> wrongDefaults = new ArrayList<>();
    declared.forEach(
        (key, def) -> {
          if (def != null && !documented.get(key).startsWith(def)) {
            wrongDefaults.add(key + ": declared " + def + ", documented " + documented.get(key));
          }
        });
    assertEquals(List.of(), wrongDefaults);
  }

  static void walk(Class<?> type, String prefix, Map<String, String> keys) {
    for (Method m : type.getDeclaredMethods()) {
      if (m.isDefault() || m.isSynthetic()) {
        continue; // derived values, not settings
      }
      String key = prefix + "." + kebab(m.getName());
      Class<?> returned = m.getReturnType();
      if (returned == Map.class) {
        Class<?> value =
            (Class<?>) ((ParameterizedType) m.getGenericReturnType()).getActualTypeArguments()[1];
        // A namespace's key is <ns>, a database's <db>.
        walk(value, key + ".\"<" + (key.endsWith(".databases") ? "db" : "ns") + ">\"", keys);
      } else if (returned.isInterface() && returned.getEnclosingClass() == RollcallConfig.class) {
        walk(returned, key, keys);
      } else {
        WithDefault def = m.getAnnotation(WithDefault.class);
        keys.put(key, def == null ? null : def.value());
      }
    }
  }

  private static String kebab(String camel) {
    return camel.replaceAll("([a-z])([A-Z])", "$1-$2").toLowerCase();
  }

  private static String strip(String cell) {
    return cell.trim().replace("`", "");
  }
}
