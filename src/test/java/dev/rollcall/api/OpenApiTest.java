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
    paths
        .fields()
        .forEachRemaining(
            p ->
                p.getValue()
                    .fields()
                    .forEachRemaining(
                        op -> {
                          if (!op.getValue().path("responses").has("4XX")) {
                            withoutProblems.add(op.getKey() + " " + p.getKey());
                          }
                        }));
    assertEquals(List.of(), withoutProblems);
    JsonNode types = doc.at("/components/schemas/Problem/properties/type/enum");
    List<String> listed = new ArrayList<>();
    types.forEach(t -> listed.add(t.asText()));
    assertTrue(listed.contains("urn:rollcall:problem:stale-fence"), listed.toString());
    assertTrue(listed.contains("urn:rollcall:problem:instance-gone"));
    assertTrue(doc.at("/components/schemas").has("ClaimResponse"));
  }
}
