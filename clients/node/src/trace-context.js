/**
 * The W3C trace context of the application's active span, sent with every request so that the
 * service's spans of a claim (and the takeover trace the claim's batch joins) link to the
 * application's trace. Only when the application has `@opentelemetry/api` (an optional peer
 * dependency): without it, or without an active span, no header is sent and nothing is loaded.
 *
 * The header is written here, not by the application's propagator: it is always W3C
 * `traceparent` (and `tracestate`), the format the service reads, whatever else the application
 * propagates.
 */

let loading;

/** `@opentelemetry/api`, once imported; null when the application does not have it. */
function openTelemetry() {
  loading ??= import('@opentelemetry/api').then(
    (api) => (api?.trace && api?.context ? api : null),
    () => null,
  );
  return loading;
}

/** The trace headers of the active span: `{ traceparent, tracestate? }`, or `{}`. */
export async function activeTraceHeaders() {
  const api = await openTelemetry();
  return api ? traceHeadersOf(api.trace.getSpanContext(api.context.active())) : {};
}

/** The W3C headers of a span context (`traceId`, `spanId`, `traceFlags`, `traceState`). */
export function traceHeadersOf(spanContext) {
  if (!spanContext || !valid(spanContext.traceId, 32) || !valid(spanContext.spanId, 16)) return {};
  const flags = ((spanContext.traceFlags ?? 0) & 0xff).toString(16).padStart(2, '0');
  const headers = { traceparent: `00-${spanContext.traceId}-${spanContext.spanId}-${flags}` };
  const state = spanContext.traceState?.serialize?.();
  if (state) headers.tracestate = state;
  return headers;
}

/** Lowercase hex of the given length, not all zeros (an invalid id, as W3C says). */
function valid(id, length) {
  return typeof id === 'string' && id.length === length && /^[0-9a-f]+$/.test(id) && !/^0+$/.test(id);
}
