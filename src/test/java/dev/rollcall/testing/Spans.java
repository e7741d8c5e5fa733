package dev.rollcall.testing;

import io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter;
import jakarta.enterprise.inject.Produces;
import jakarta.inject.Singleton;

/**
 * The span exporter of the tests: spans are kept in memory for a test to read. The extension
 * exports to every {@code SpanExporter} bean; it is used only where a test switches tracing on
 * ({@link TracingOn}), elsewhere tracing is off as in a deployment without an OTLP endpoint.
 */
public class Spans {

  @Produces
  @Singleton
  InMemorySpanExporter exporter() {
    return InMemorySpanExporter.create();
  }
}
