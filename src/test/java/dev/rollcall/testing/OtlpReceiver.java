package dev.rollcall.testing;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;
import io.opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse;
import io.opentelemetry.proto.trace.v1.ResourceSpans;
import io.opentelemetry.proto.trace.v1.ScopeSpans;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicLong;
import java.util.zip.GZIPInputStream;

/**
 * An OTLP/HTTP trace receiver on loopback, standing in for a collector: it answers {@code POST
 * /v1/traces} (binary protobuf, gzip or not) and keeps every span it was sent. A packaged service
 * started with {@link #serviceSettings} exports its spans here, so they are built, batched, encoded
 * and sent as they would be to a real collector.
 */
public final class OtlpReceiver implements AutoCloseable {

  private final HttpServer server;
  private final ExecutorService threads = Executors.newFixedThreadPool(2);
  private final ConcurrentLinkedQueue<TraceSpan> spans = new ConcurrentLinkedQueue<>();
  private final AtomicLong requests = new AtomicLong();
  private final AtomicLong refused = new AtomicLong();

  private OtlpReceiver(HttpServer server) {
    this.server = server;
  }

  /** Listens on a free loopback port. */
  public static OtlpReceiver start() throws IOException {
    HttpServer server =
        HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
    OtlpReceiver receiver = new OtlpReceiver(server);
    server.createContext("/", receiver::handle);
    server.setExecutor(receiver.threads);
    server.start();
    return receiver;
  }

  /** {@code http://127.0.0.1:port}: the endpoint a service exports to (it adds the path). */
  public String endpoint() {
    return "http://" + server.getAddress().getHostString() + ":" + server.getAddress().getPort();
  }

  /** A service's settings that switch its tracing on, exporting here over OTLP/HTTP. */
  public Map<String, String> serviceSettings() {
    return Map.of(
        "quarkus.otel.exporter.otlp.traces.endpoint",
        endpoint(),
        "quarkus.otel.exporter.otlp.traces.protocol",
        "http/protobuf");
  }

  /** Every span received so far, in the order they came. */
  public List<TraceSpan> spans() {
    return new ArrayList<>(spans);
  }

  /** Export requests answered, and requests refused (another path or method, or undecodable). */
  public String describe() {
    return String.format(
        "%d spans in %d export requests, %d refused", spans.size(), requests.get(), refused.get());
  }

  private void handle(HttpExchange exchange) throws IOException {
    try (exchange) {
      if (!exchange.getRequestMethod().equals("POST")
          || !exchange.getRequestURI().getPath().endsWith("/v1/traces")) {
        refused.incrementAndGet();
        exchange.sendResponseHeaders(404, -1);
        return;
      }
      ExportTraceServiceRequest request;
      try (InputStream body = body(exchange)) {
        request = ExportTraceServiceRequest.parseFrom(body);
      } catch (IOException | RuntimeException | LinkageError e) {
        // Counted and answered: a receiver that cannot decode must not look like a silent service.
        refused.incrementAndGet();
        exchange.sendResponseHeaders(400, -1);
        return;
      }
      for (ResourceSpans resource : request.getResourceSpansList()) {
        for (ScopeSpans scope : resource.getScopeSpansList()) {
          scope.getSpansList().forEach(s -> spans.add(TraceSpan.of(s)));
        }
      }
      requests.incrementAndGet();
      byte[] answer = ExportTraceServiceResponse.getDefaultInstance().toByteArray();
      exchange.getResponseHeaders().set("Content-Type", "application/x-protobuf");
      exchange.sendResponseHeaders(200, answer.length == 0 ? -1 : answer.length);
      if (answer.length > 0) {
        try (OutputStream out = exchange.getResponseBody()) {
          out.write(answer);
        }
      }
    }
  }

  private static InputStream body(HttpExchange exchange) throws IOException {
    InputStream raw = exchange.getRequestBody();
    String encoding = exchange.getRequestHeaders().getFirst("Content-Encoding");
    return "gzip".equalsIgnoreCase(encoding) ? new GZIPInputStream(raw) : raw;
  }

  @Override
  public void close() {
    server.stop(0);
    threads.shutdownNow();
  }
}
