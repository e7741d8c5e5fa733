package dev.rollcall.testing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * How the container image runs the service, read from {@code src/main/docker/Dockerfile.jvm}: the
 * JVM options of {@code GC_CONTAINER_OPTIONS} and {@code JAVA_OPTS_APPEND}, and the C library's
 * {@code MALLOC_*} settings. Service processes of the tests and benchmarks start with them, so the
 * memory and latency they measure are the image's, and the image's settings live in one place.
 */
public record ImageRuntime(List<String> jvmOptions, Map<String, String> environment) {

  /** The image definition, relative to the project root. */
  public static final Path DOCKERFILE = Path.of("src", "main", "docker", "Dockerfile.jvm");

  /** {@code ENV NAME=value} or {@code ENV NAME="value"}, one variable a line. */
  private static final Pattern ENV =
      Pattern.compile("^ENV\\s+([A-Z_][A-Z0-9_]*)=(?:\"([^\"]*)\"|(\\S*))\\s*$");

  /** The image's settings; fails when the Dockerfile is missing or sets no JVM options. */
  public static ImageRuntime ofProject() {
    try {
      return parse(Files.readString(DOCKERFILE));
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read " + DOCKERFILE, e);
    }
  }

  static ImageRuntime parse(String dockerfile) {
    Map<String, String> env = new LinkedHashMap<>();
    for (String line : dockerfile.split("\\R")) {
      Matcher m = ENV.matcher(line.strip());
      if (m.matches()) {
        env.put(m.group(1), m.group(2) != null ? m.group(2) : m.group(3));
      }
    }
    List<String> jvm = new ArrayList<>();
    for (String variable : List.of("GC_CONTAINER_OPTIONS", "JAVA_OPTS_APPEND")) {
      for (String option : env.getOrDefault(variable, "").split("\\s+")) {
        // The image listens on every interface of its container; a test's service stays on
        // localhost.
        if (!option.isBlank() && !option.startsWith("-Dquarkus.http.host=")) {
          jvm.add(option);
        }
      }
    }
    if (jvm.stream().noneMatch(o -> o.startsWith("-Xmx"))) {
      throw new IllegalStateException(DOCKERFILE + " sets no heap size (-Xmx): " + jvm);
    }
    Map<String, String> malloc = new LinkedHashMap<>();
    env.forEach(
        (name, value) -> {
          if (name.startsWith("MALLOC_")) {
            malloc.put(name, value);
          }
        });
    return new ImageRuntime(List.copyOf(jvm), Map.copyOf(malloc));
  }
}
