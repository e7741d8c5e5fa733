package dev.rollcall.config;

import io.smallrye.config.ConfigSourceContext;
import io.smallrye.config.ConfigSourceFactory;
import io.smallrye.config.ConfigValue;
import io.smallrye.config.PropertiesConfigSource;
import java.util.List;
import java.util.Map;
import org.eclipse.microprofile.config.spi.ConfigSource;

/**
 * Tracing is off unless an OTLP endpoint is configured: without {@code
 * quarkus.otel.exporter.otlp.endpoint} (or its {@code .traces.endpoint}) the OpenTelemetry SDK is
 * disabled, so neither the demo nor a deployment without a collector tries to export anything. Only
 * a default: {@code quarkus.otel.sdk.disabled} set anywhere else wins.
 */
public class TracingSwitch implements ConfigSourceFactory {

  /** The endpoints that switch tracing on. */
  static final List<String> ENDPOINTS =
      List.of("quarkus.otel.exporter.otlp.endpoint", "quarkus.otel.exporter.otlp.traces.endpoint");

  static final String SDK_DISABLED = "quarkus.otel.sdk.disabled";

  /** Below application.properties (250) and the environment (300): a default, nothing more. */
  static final int ORDINAL = 110;

  @Override
  public Iterable<ConfigSource> getConfigSources(ConfigSourceContext context) {
    boolean endpoint = ENDPOINTS.stream().anyMatch(name -> configured(context.getValue(name)));
    return List.of(
        new PropertiesConfigSource(
            Map.of(SDK_DISABLED, String.valueOf(!endpoint)), "rollcall-tracing-switch", ORDINAL));
  }

  /**
   * Set by someone: a property, the environment, a system property. Not the extension's own default
   * endpoint ({@code http://localhost:4317}), which a defaults source of negative ordinal holds:
   * with that counted, every service would try to export to a collector nobody runs.
   */
  private static boolean configured(ConfigValue value) {
    return value != null
        && value.getValue() != null
        && !value.getValue().isBlank()
        && value.getConfigSourceOrdinal() > 0;
  }
}
