package dev.rollcall.testing;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;

/**
 * A small HTTP client of the service for tests and benchmarks: thread-safe, so many simulated
 * instances can share one.
 */
public final class Api {

  public static final ObjectMapper JSON = new ObjectMapper();

  private final List<URI> bases;
  private volatile int current;
  private final HttpClient http;

  public Api(URI base) {
    this(List.of(base));
  }

  /**
   * A client of several service replicas: a request that cannot reach one (refused, reset) is sent
   * to the next, as a load balancer would.
   */
  public Api(List<URI> bases) {
    this.bases = List.copyOf(bases);
    this.http =
        HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofSeconds(5))
            .build();
  }

  /** An HTTP answer: status, content type and JSON body (null when empty). */
  public record Reply(int status, String contentType, JsonNode body, String raw) {
    public Reply expect(int expected) {
      if (status != expected) {
        throw new AssertionError("expected HTTP " + expected + " but got " + this);
      }
      return this;
    }

    public String text(String field) {
      return body.path(field).asText();
    }
  }

  /** A registered instance. */
  public record Instance(UUID id, String token, String namespace, String deploymentId) {}

  /** A claimed batch. */
  public record Batch(long id, long epochId, int fence, List<String> runIds, JsonNode json) {}

  public Reply send(String method, String path, String bearer, String body) {
    for (int attempt = 1; ; attempt++) {
      int replica = current;
      try {
        return sendTo(bases.get(replica), method, path, bearer, body);
      } catch (UncheckedIOException e) {
        if (attempt >= 2 * bases.size() || bases.size() == 1) {
          throw e;
        }
        current = (replica + 1) % bases.size();
      }
    }
  }

  private Reply sendTo(URI base, String method, String path, String bearer, String body) {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(base.resolve(path)).timeout(Duration.ofSeconds(60));
    if (bearer != null) {
      b.header("Authorization", "Bearer " + bearer);
    }
    if (body != null) {
      b.header("Content-Type", "application/json");
      b.method(method, HttpRequest.BodyPublishers.ofString(body));
    } else {
      b.method(method, HttpRequest.BodyPublishers.noBody());
    }
    try {
      HttpResponse<String> r = http.send(b.build(), HttpResponse.BodyHandlers.ofString());
      String type = r.headers().firstValue("Content-Type").orElse("");
      JsonNode json = type.contains("json") && !r.body().isEmpty() ? JSON.readTree(r.body()) : null;
      return new Reply(r.statusCode(), type, json, r.body());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  public Reply post(String path, String bearer, Object body) {
    try {
      return send("POST", path, bearer, body == null ? null : JSON.writeValueAsString(body));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  public Instance register(String namespace, String deploymentId, String name) {
    ObjectNode body =
        JSON.createObjectNode()
            .put("namespace", namespace)
            .put("deploymentId", deploymentId)
            .put("name", name);
    Reply r = post("instances", SourceTables.secret(namespace), body).expect(201);
    return new Instance(
        UUID.fromString(r.text("instanceId")), r.text("token"), namespace, deploymentId);
  }

  public Instance register(
      String namespace, String deploymentId, String name, List<String> workers) {
    ObjectNode body =
        JSON.createObjectNode()
            .put("namespace", namespace)
            .put("deploymentId", deploymentId)
            .put("name", name);
    workers.forEach(body.putArray("workerIds")::add);
    Reply r = post("instances", SourceTables.secret(namespace), body).expect(201);
    return new Instance(
        UUID.fromString(r.text("instanceId")), r.text("token"), namespace, deploymentId);
  }

  public Reply heartbeat(Instance instance) {
    return post("instances/" + instance.id() + "/heartbeat", instance.token(), null);
  }

  /** A heartbeat that reports the instance's in-flight set. */
  public Reply heartbeat(Instance instance, List<String> inFlight) {
    return post(
        "instances/" + instance.id() + "/heartbeat", instance.token(), inFlightBody(inFlight));
  }

  public Reply leave(Instance instance) {
    return send("DELETE", "instances/" + instance.id(), instance.token(), null);
  }

  /** A graceful leave with the last in-flight set. */
  public Reply leave(Instance instance, List<String> inFlight) {
    try {
      return send(
          "DELETE",
          "instances/" + instance.id(),
          instance.token(),
          JSON.writeValueAsString(inFlightBody(inFlight)));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** An exiting leave (the process exits right after) with the last in-flight set. */
  public Reply exitingLeave(Instance instance, List<String> inFlight) {
    ObjectNode body = inFlightBody(inFlight);
    body.put("exiting", true);
    try {
      return send(
          "DELETE", "instances/" + instance.id(), instance.token(), JSON.writeValueAsString(body));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** An in-flight entry in the object form: a run and the queue message that delivered it. */
  public static ObjectNode execution(String runId, String messageId) {
    ObjectNode e = JSON.createObjectNode().put("runId", runId);
    return messageId == null ? e : e.put("messageId", messageId);
  }

  /** A heartbeat whose in-flight set is given as entries (strings or objects). */
  public Reply heartbeatEntries(Instance instance, List<? extends JsonNode> entries) {
    ObjectNode body = JSON.createObjectNode();
    body.putArray("inFlight").addAll(entries);
    return post("instances/" + instance.id() + "/heartbeat", instance.token(), body);
  }

  /** A heartbeat that names queue workers the instance found since it registered. */
  public Reply heartbeatWorkers(Instance instance, List<String> workerIds) {
    ObjectNode body = JSON.createObjectNode();
    workerIds.forEach(body.putArray("workerIds")::add);
    return post("instances/" + instance.id() + "/heartbeat", instance.token(), body);
  }

  /** A graceful leave whose last in-flight set is given as entries (strings or objects). */
  public Reply leaveEntries(Instance instance, List<? extends JsonNode> entries) {
    ObjectNode body = JSON.createObjectNode();
    body.putArray("inFlight").addAll(entries);
    try {
      return send(
          "DELETE", "instances/" + instance.id(), instance.token(), JSON.writeValueAsString(body));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static ObjectNode inFlightBody(List<String> inFlight) {
    ObjectNode body = JSON.createObjectNode();
    inFlight.forEach(body.putArray("inFlight")::add);
    return body;
  }

  public Reply claim(Instance instance, int maxRuns) {
    return post(
        "recovery/claim", instance.token(), JSON.createObjectNode().put("maxRuns", maxRuns));
  }

  /**
   * A claim the service may hold up to {@code waitMs} while it has nothing to hand out; {@code
   * idle}: hold a {@code done} answer too.
   */
  public Reply claimHeld(Instance instance, int maxRuns, int waitMs, boolean idle) {
    return post(
        "recovery/claim",
        instance.token(),
        JSON.createObjectNode().put("maxRuns", maxRuns).put("waitMs", waitMs).put("idle", idle));
  }

  /** How long {@link #claimBatch} keeps asking while told to wait. */
  static final Duration CLAIM_DEADLINE = Duration.ofSeconds(60);

  /**
   * Claims until a batch or done comes back, honouring wait hints; null when done. Fails if the
   * service keeps answering {@code wait} (or 429) for {@link #CLAIM_DEADLINE}.
   */
  public Batch claimBatch(Instance instance, int maxRuns) {
    long deadline = System.nanoTime() + CLAIM_DEADLINE.toNanos();
    while (true) {
      if (System.nanoTime() - deadline > 0) {
        throw stuck(instance, "was told to wait", CLAIM_DEADLINE, "no batch and not done");
      }
      Reply r = claim(instance, maxRuns);
      if (r.status() == 429) {
        // Rate limited: a well-behaved client waits as told and asks again.
        Poll.sleep(r.body().get("retryAfterMs").asLong());
        continue;
      }
      r.expect(200);
      switch (r.text("status")) {
        case "batch":
          return batch(r.body().get("batch"));
        case "done":
          return null;
        case "wait":
          Poll.sleep(r.body().get("retryAfterMs").asLong());
          break;
        default:
          throw new AssertionError("unexpected claim answer " + r);
      }
    }
  }

  /** How long {@link #drain} keeps being handed batches before it calls it a livelock. */
  static final Duration DRAIN_DEADLINE = Duration.ofSeconds(120);

  /**
   * Claims and completes batches (no run failed) until the claimer is done; the batches, in order.
   * Fails if batches keep coming for {@link #DRAIN_DEADLINE}.
   */
  public List<Batch> drain(Instance instance, int maxRuns) {
    long deadline = System.nanoTime() + DRAIN_DEADLINE.toNanos();
    List<Batch> drained = new ArrayList<>();
    for (Batch b; (b = claimBatch(instance, maxRuns)) != null; ) {
      complete(instance, b, List.of()).expect(200);
      drained.add(b);
      if (System.nanoTime() - deadline > 0) {
        throw stuck(
            instance, "was still handed batches", DRAIN_DEADLINE, drained.size() + " batches");
      }
    }
    return drained;
  }

  private static AssertionError stuck(
      Instance instance, String what, Duration deadline, String detail) {
    return new AssertionError(
        "instance "
            + instance.id()
            + " "
            + what
            + " for "
            + deadline.toSeconds()
            + " s: "
            + detail);
  }

  public static Batch batch(JsonNode json) {
    List<String> ids = new ArrayList<>();
    json.get("runs").forEach(run -> ids.add(run.get("runId").asText()));
    return new Batch(
        json.get("id").asLong(),
        json.get("epochId").asLong(),
        json.get("fence").asInt(),
        ids,
        json);
  }

  public Reply complete(Instance instance, Batch batch, List<String> failed) {
    return complete(instance, batch.id(), batch.fence(), failed);
  }

  public Reply complete(Instance instance, long batchId, int fence, List<String> failed) {
    ObjectNode body = JSON.createObjectNode().put("fence", fence);
    body.putArray("failedRunIds")
        .addAll(failed.stream().map(JSON::valueToTree).map(JsonNode.class::cast).toList());
    return post("recovery/batches/" + batchId + "/complete", instance.token(), body);
  }
}
