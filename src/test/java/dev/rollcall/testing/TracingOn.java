package dev.rollcall.testing;

import io.quarkus.test.junit.QuarkusTestProfile;
import java.util.Map;

/**
 * The service with tracing on, exporting to the tests' in-memory exporter ({@link Spans}) at once
 * rather than every few seconds. A profile of its own: its tests boot the service once more.
 */
public class TracingOn implements QuarkusTestProfile {

  @Override
  public Map<String, String> getConfigOverrides() {
    return Map.of(
        "quarkus.otel.sdk.disabled", "false", "quarkus.otel.bsp.schedule.delay", "PT0.02S");
  }
}
