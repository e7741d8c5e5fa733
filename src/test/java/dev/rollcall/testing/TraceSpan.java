package dev.rollcall.testing;

import io.opentelemetry.proto.common.v1.AnyValue;
import io.opentelemetry.proto.common.v1.KeyValue;
import io.opentelemetry.proto.trace.v1.Span;
import io.opentelemetry.sdk.trace.data.SpanData;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.stream.Collectors;

/**
 * One finished span as the tests read it, whichever way it reached them: from the in-memory
 * exporter ({@link #of(SpanData)}) or over OTLP ({@link #of(Span)}, {@link OtlpReceiver}). Ids are
 * lower-case hex; a root's parent id is empty; attribute values are strings (a list as {@code [a,
 * b]}).
 */
public record TraceSpan(
    String traceId,
    String spanId,
    String parentSpanId,
    String name,
    long startNanos,
    long endNanos,
    Map<String, String> attributes,
    int links) {

  private static final String INVALID_SPAN_ID = "0000000000000000";

  public static TraceSpan of(SpanData s) {
    Map<String, String> attributes = new LinkedHashMap<>();
    s.getAttributes().forEach((k, v) -> attributes.put(k.getKey(), String.valueOf(v)));
    String parent = s.getParentSpanId();
    return new TraceSpan(
        s.getTraceId(),
        s.getSpanId(),
        parent.equals(INVALID_SPAN_ID) ? "" : parent,
        s.getName(),
        s.getStartEpochNanos(),
        s.getEndEpochNanos(),
        attributes,
        s.getLinks().size());
  }

  public static TraceSpan of(Span s) {
    HexFormat hex = HexFormat.of();
    Map<String, String> attributes = new LinkedHashMap<>();
    for (KeyValue kv : s.getAttributesList()) {
      attributes.put(kv.getKey(), text(kv.getValue()));
    }
    return new TraceSpan(
        hex.formatHex(s.getTraceId().toByteArray()),
        hex.formatHex(s.getSpanId().toByteArray()),
        hex.formatHex(s.getParentSpanId().toByteArray()),
        s.getName(),
        s.getStartTimeUnixNano(),
        s.getEndTimeUnixNano(),
        attributes,
        s.getLinksCount());
  }

  private static String text(AnyValue v) {
    return switch (v.getValueCase()) {
      case STRING_VALUE -> v.getStringValue();
      case INT_VALUE -> String.valueOf(v.getIntValue());
      case BOOL_VALUE -> String.valueOf(v.getBoolValue());
      case DOUBLE_VALUE -> String.valueOf(v.getDoubleValue());
      case ARRAY_VALUE ->
          v.getArrayValue().getValuesList().stream()
              .map(TraceSpan::text)
              .collect(Collectors.joining(", ", "[", "]"));
      default -> v.toString().strip();
    };
  }

  /** The attribute {@code key}, or null. */
  public String attribute(String key) {
    return attributes.get(key);
  }

  public boolean isRoot() {
    return parentSpanId.isEmpty();
  }

  public double durationMs() {
    return (endNanos - startNanos) / 1e6;
  }
}
