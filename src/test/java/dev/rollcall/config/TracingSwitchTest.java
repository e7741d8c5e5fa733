package dev.rollcall.config;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.smallrye.config.PropertiesConfigSource;
import io.smallrye.config.SmallRyeConfig;
import io.smallrye.config.SmallRyeConfigBuilder;
import java.util.Map;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** Tracing is on exactly when an OTLP endpoint is configured, unless the SDK switch is set. */
@Tag("unit")
class TracingSwitchTest {

  /** The extension's defaults, as Quarkus holds them: below every source anyone sets. */
  static final PropertiesConfigSource DEFAULTS =
      new PropertiesConfigSource(
          Map.of("quarkus.otel.exporter.otlp.endpoint", "http://localhost:4317"),
          "defaults",
          Integer.MIN_VALUE);

  static String sdkDisabled(Map<String, String> settings) {
    SmallRyeConfig config =
        new SmallRyeConfigBuilder()
            .withSources(DEFAULTS)
            .withSources(new PropertiesConfigSource(settings, "settings", 250))
            .withSources(new TracingSwitch())
            .build();
    return config.getRawValue(TracingSwitch.SDK_DISABLED);
  }

  @Test
  void withoutAnEndpointTheSdkIsOffSoNothingTriesToExportToTheDefaultOne() {
    assertEquals("true", sdkDisabled(Map.of()));
    assertEquals("true", sdkDisabled(Map.of("quarkus.otel.exporter.otlp.endpoint", " ")));
  }

  @Test
  void anEndpointForAllSignalsOrForTracesSwitchesItOn() {
    assertEquals(
        "false",
        sdkDisabled(Map.of("quarkus.otel.exporter.otlp.endpoint", "http://collector:4317")));
    assertEquals(
        "false",
        sdkDisabled(Map.of("quarkus.otel.exporter.otlp.traces.endpoint", "http://collector:4317")));
  }

  @Test
  void theSdkSwitchSetAnywhereElseWins() {
    assertEquals(
        "true",
        sdkDisabled(
            Map.of(
                "quarkus.otel.exporter.otlp.endpoint",
                "http://collector:4317",
                "quarkus.otel.sdk.disabled",
                "true")));
    assertEquals("false", sdkDisabled(Map.of("quarkus.otel.sdk.disabled", "false")));
  }
}
