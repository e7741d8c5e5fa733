package dev.rollcall.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

@Tag("unit")
class ImageRuntimeTest {

  @Test
  void readsTheOptionsAndMallocSettingsOfTheImage() {
    ImageRuntime image =
        ImageRuntime.parse(
            String.join(
                "\n",
                "FROM base",
                "# ENV JAVA_OPTS_APPEND=\"-Xmx1g\" (a comment)",
                "ENV LANGUAGE='en_US:en'",
                "ENV MALLOC_ARENA_MAX=2",
                "ENV GC_CONTAINER_OPTIONS=\"-XX:+UseSerialGC\"",
                "ENV JAVA_OPTS_APPEND=\"-Xmx128m -Xss512k  -Dquarkus.http.host=0.0.0.0 -Da=b\"",
                "ENV JAVA_APP_JAR=\"/deployments/quarkus-run.jar\""));
    assertEquals(List.of("-XX:+UseSerialGC", "-Xmx128m", "-Xss512k", "-Da=b"), image.jvmOptions());
    assertEquals(Map.of("MALLOC_ARENA_MAX", "2"), image.environment());
  }

  @Test
  void refusesAnImageWithoutAHeapSize() {
    assertThrows(
        IllegalStateException.class,
        () -> ImageRuntime.parse("ENV GC_CONTAINER_OPTIONS=\"-XX:+UseSerialGC\""));
  }

  @Test
  void theProjectImageBoundsTheHeapAndTheCLibrarysArenas() {
    ImageRuntime image = ImageRuntime.ofProject();
    assertTrue(image.jvmOptions().contains("-XX:+UseSerialGC"), image.jvmOptions().toString());
    assertTrue(
        image.jvmOptions().stream().anyMatch(o -> o.startsWith("-XX:TrimNativeHeapInterval=")),
        image.jvmOptions().toString());
    assertEquals("2", image.environment().get("MALLOC_ARENA_MAX"));
  }
}
