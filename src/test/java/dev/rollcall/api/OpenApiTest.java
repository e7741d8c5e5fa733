package dev.rollcall.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import dev.rollcall.testing.Api;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.ServiceTest;
import io.quarkus.test.common.http.TestHTTPResource;
import java.net.URI;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;

/** The OpenAPI document describes every endpoint, its schemas and its problem types. */
@ServiceTest
class OpenApiTest extends ApiTestBase {

  @TestHTTPResource(value = "/", management = true)
  URI management;

  @Test
  void everyEndpointAndProblemTypeIsDescribed() {
    JsonNode doc =
        new Api(management).send("GET", "openapi?format=json", null, null).expect(200).body();

    JsonNode paths = doc.get("paths");
    for (String path :
        List.of(
            "/instances",
            "/instances/{id}/heartbeat",
            "/instances/{id}",
            "/recovery/claim",
            "/recovery/batches/{id}/complete",
            "/admin/namespaces",
            "/admin/instances",
            "/admin/epochs",
            "/admin/epochs/{id}",
            "/admin/epochs/{id}/batches",
            "/admin/runs/{runId}",
            "/admin/instances/{id}/evict",
            "/admin/namespaces/{ns}/recovery")) {
      assertTrue(paths.has(path), "missing " + path);
    }
    List<String> withoutProblems = new ArrayList<>();
    operations(doc)
        .forEach(
            (op, node) -> {
              if (!node.path("responses").has("4XX")) {
                withoutProblems.add(op);
              }
            });
    assertEquals(List.of(), withoutProblems);
    JsonNode types = doc.at("/components/schemas/Problem/properties/type/enum");
    List<String> listed = new ArrayList<>();
    types.forEach(t -> listed.add(t.asText()));
    assertTrue(listed.contains("urn:rollcall:problem:stale-fence"), listed.toString());
    assertTrue(listed.contains("urn:rollcall:problem:instance-gone"));
    assertTrue(doc.at("/components/schemas").has("ClaimResponse"));
  }

  /** The scheme the document names is the one the request filter enforces ({@link Credentials}). */
  @Test
  void everyEndpointSaysWhichTokenItNeeds() {
    JsonNode doc =
        new Api(management).send("GET", "openapi?format=json", null, null).expect(200).body();
    JsonNode schemes = doc.at("/components/securitySchemes");
    assertTrue(schemes.has(Credentials.INSTANCE_TOKEN), schemes.toString());
    assertTrue(schemes.has(Credentials.ADMIN_TOKEN), schemes.toString());

    Map<String, String> needed = new TreeMap<>();
    operations(doc)
        .forEach(
            (op, node) -> {
              JsonNode security = node.path("security");
              needed.put(op, security.isEmpty() ? "none" : security.get(0).fieldNames().next());
            });
    needed.forEach(
        (op, scheme) -> {
          String expected =
              op.contains(" /admin/")
                  ? Credentials.ADMIN_TOKEN
                  : op.equals("post /instances") || !op.matches("\\w+ /(instances|recovery)/.*")
                      ? "none"
                      : Credentials.INSTANCE_TOKEN;
          assertEquals(expected, scheme, op);
        });
    assertEquals(Credentials.INSTANCE_TOKEN, needed.get("post /recovery/claim"));
    assertEquals(Credentials.INSTANCE_TOKEN, needed.get("delete /instances/{id}"));
    assertEquals("none", needed.get("post /instances"));
  }

  /** Every operation of the document, as "method path". */
  private static Map<String, JsonNode> operations(JsonNode doc) {
    Map<String, JsonNode> ops = new TreeMap<>();
    doc.get("paths")
        .fields()
        .forEachRemaining(
            p ->
                p.getValue()
                    .fields()
                    .forEachRemaining(
                        op -> ops.put(op.getKey() + " " + p.getKey(), op.getValue())));
    return ops;
  }
}
