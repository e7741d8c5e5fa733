package dev.rollcall.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Batch;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.Db;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * Every malformed, unauthorised or out-of-range request gets a 4xx problem document and changes
 * nothing in the database.
 */
@ServiceTest
class BadInputTest extends ApiTestBase {

  /** One hostile request and the status it must get. */
  record Case(
      String label,
      String method,
      String path,
      String bearer,
      String contentType,
      String body,
      int status) {}

  @Test
  void badRequestsGetAProblemAndChangeNothing() throws Exception {
    String ns = SourceTables.SMALL;
    String secret = SourceTables.secret(ns);
    String deploy = UUID.randomUUID().toString();
    Instance a = api.register(ns, deploy, "a");
    Instance other = api.register(SourceTables.GROWING, deploy, "other");
    Batch batch = api.claimBatch(a, 5);
    String complete = "recovery/batches/" + batch.id() + "/complete";
    String hb = "instances/" + a.id() + "/heartbeat";
    String reg = "{\"namespace\":\"" + ns + "\",\"deploymentId\":\"d\",\"name\":\"n\"";

    List<Case> cases =
        new ArrayList<>(
            List.of(
                new Case(
                    "no credentials",
                    "POST",
                    "instances",
                    null,
                    "application/json",
                    reg + "}",
                    401),
                new Case(
                    "wrong secret",
                    "POST",
                    "instances",
                    "nope",
                    "application/json",
                    reg + "}",
                    401),
                new Case(
                    "other namespace's secret",
                    "POST",
                    "instances",
                    SourceTables.secret(SourceTables.LARGE),
                    "application/json",
                    reg + "}",
                    401),
                new Case(
                    "instance token as secret",
                    "POST",
                    "instances",
                    a.token(),
                    "application/json",
                    reg + "}",
                    401),
                new Case(
                    "unknown namespace",
                    "POST",
                    "instances",
                    secret,
                    "application/json",
                    "{\"namespace\":\"nope\",\"deploymentId\":\"d\",\"name\":\"n\"}",
                    404),
                new Case(
                    "malformed json", "POST", "instances", secret, "application/json", "{", 400),
                new Case(
                    "trailing garbage",
                    "POST",
                    "instances",
                    secret,
                    "application/json",
                    reg + "} x",
                    400),
                new Case("array body", "POST", "instances", secret, "application/json", "[]", 400),
                new Case("empty body", "POST", "instances", secret, "application/json", "", 400),
                new Case(
                    "number as namespace",
                    "POST",
                    "instances",
                    secret,
                    "application/json",
                    "{\"namespace\":5,\"deploymentId\":\"d\",\"name\":\"n\"}",
                    400),
                new Case(
                    "missing deploymentId",
                    "POST",
                    "instances",
                    secret,
                    "application/json",
                    "{\"namespace\":\"" + ns + "\",\"name\":\"n\"}",
                    400),
                new Case(
                    "blank name",
                    "POST",
                    "instances",
                    secret,
                    "application/json",
                    "{\"namespace\":\"" + ns + "\",\"deploymentId\":\"d\",\"name\":\"  \"}",
                    400),
                new Case(
                    "huge name",
                    "POST",
                    "instances",
                    secret,
                    "application/json",
                    "{\"namespace\":\""
                        + ns
                        + "\",\"deploymentId\":\"d\",\"name\":\""
                        + "n".repeat(201)
                        + "\"}",
                    400),
                new Case(
                    "control characters",
                    "POST",
                    "instances",
                    secret,
                    "application/json",
                    "{\"namespace\":\"" + ns + "\",\"deploymentId\":\"d\\u0000\",\"name\":\"n\"}",
                    400),
                new Case(
                    "workerIds not a list",
                    "POST",
                    "instances",
                    secret,
                    "application/json",
                    reg + ",\"workerIds\":\"w\"}",
                    400),
                new Case(
                    "too many workerIds",
                    "POST",
                    "instances",
                    secret,
                    "application/json",
                    reg
                        + ",\"workerIds\":["
                        + String.join(",", java.util.Collections.nCopies(1001, "\"w\""))
                        + "]}",
                    400),
                new Case(
                    "unknown field",
                    "POST",
                    "instances",
                    secret,
                    "application/json",
                    reg + ",\"admin\":true}",
                    400),
                new Case("not json", "POST", "instances", secret, "text/plain", reg + "}", 415),
                new Case(
                    "oversized body",
                    "POST",
                    "instances",
                    secret,
                    "application/json",
                    reg + ",\"pad\":\"" + "x".repeat(2 * 1024 * 1024) + "\"}",
                    413),
                new Case(
                    "heartbeat without token", "POST", hb, null, "application/json", "{}", 401),
                new Case(
                    "heartbeat with garbage token",
                    "POST",
                    hb,
                    "rci_garbage",
                    "application/json",
                    "{}",
                    401),
                new Case(
                    "inFlight not a list",
                    "POST",
                    hb,
                    a.token(),
                    "application/json",
                    "{\"inFlight\":\"wrun_1\"}",
                    400),
                new Case(
                    "inFlight with numbers",
                    "POST",
                    hb,
                    a.token(),
                    "application/json",
                    "{\"inFlight\":[1,2]}",
                    400),
                new Case(
                    "inFlight with an oversized id",
                    "POST",
                    hb,
                    a.token(),
                    "application/json",
                    "{\"inFlight\":[\"" + "r".repeat(201) + "\"]}",
                    400),
                new Case(
                    "an in-flight entry without a runId",
                    "POST",
                    hb,
                    a.token(),
                    "application/json",
                    "{\"inFlight\":[{\"messageId\":\"msg_1\"}]}",
                    400),
                new Case(
                    "an in-flight entry with a numeric runId",
                    "POST",
                    hb,
                    a.token(),
                    "application/json",
                    "{\"inFlight\":[{\"runId\":5}]}",
                    400),
                new Case(
                    "an in-flight entry with a numeric messageId",
                    "POST",
                    hb,
                    a.token(),
                    "application/json",
                    "{\"inFlight\":[{\"runId\":\"wrun_1\",\"messageId\":7}]}",
                    400),
                new Case(
                    "an in-flight entry with a blank messageId",
                    "POST",
                    hb,
                    a.token(),
                    "application/json",
                    "{\"inFlight\":[{\"runId\":\"wrun_1\",\"messageId\":\" \"}]}",
                    400),
                new Case(
                    "an in-flight entry that is null",
                    "POST",
                    hb,
                    a.token(),
                    "application/json",
                    "{\"inFlight\":[null]}",
                    400),
                new Case(
                    "an in-flight entry that is a list",
                    "POST",
                    hb,
                    a.token(),
                    "application/json",
                    "{\"inFlight\":[[\"wrun_1\"]]}",
                    400),
                new Case(
                    "an in-flight entry with an oversized messageId",
                    "POST",
                    hb,
                    a.token(),
                    "application/json",
                    "{\"inFlight\":[{\"runId\":\"wrun_1\",\"messageId\":\""
                        + "m".repeat(201)
                        + "\"}]}",
                    400),
                new Case(
                    "leave with a malformed inFlight",
                    "DELETE",
                    "instances/" + a.id(),
                    a.token(),
                    "application/json",
                    "{\"inFlight\":{}}",
                    400),
                new Case(
                    "heartbeat of a malformed id",
                    "POST",
                    "instances/xyz/heartbeat",
                    a.token(),
                    "application/json",
                    "{}",
                    404),
                new Case(
                    "heartbeat workerIds not a list",
                    "POST",
                    hb,
                    a.token(),
                    "application/json",
                    "{\"workerIds\":\"w\"}",
                    400),
                new Case(
                    "heartbeat with too many workerIds",
                    "POST",
                    hb,
                    a.token(),
                    "application/json",
                    "{\"workerIds\":["
                        + String.join(",", java.util.Collections.nCopies(1001, "\"w\""))
                        + "]}",
                    400),
                new Case(
                    "heartbeat with an empty worker id",
                    "POST",
                    hb,
                    a.token(),
                    "application/json",
                    "{\"workerIds\":[\"\"]}",
                    400),
                new Case(
                    "heartbeat of another instance",
                    "POST",
                    "instances/" + other.id() + "/heartbeat",
                    a.token(),
                    "application/json",
                    "{}",
                    403),
                new Case(
                    "heartbeat of an unknown instance",
                    "POST",
                    "instances/" + UUID.randomUUID() + "/heartbeat",
                    a.token(),
                    "application/json",
                    "{}",
                    403),
                new Case(
                    "leave of another instance",
                    "DELETE",
                    "instances/" + other.id(),
                    a.token(),
                    null,
                    null,
                    403),
                new Case(
                    "claim without token",
                    "POST",
                    "recovery/claim",
                    null,
                    "application/json",
                    "{}",
                    401),
                new Case(
                    "claim with a secret",
                    "POST",
                    "recovery/claim",
                    secret,
                    "application/json",
                    "{}",
                    401),
                new Case(
                    "negative maxRuns",
                    "POST",
                    "recovery/claim",
                    a.token(),
                    "application/json",
                    "{\"maxRuns\":-1}",
                    400),
                new Case(
                    "zero maxRuns",
                    "POST",
                    "recovery/claim",
                    a.token(),
                    "application/json",
                    "{\"maxRuns\":0}",
                    400),
                new Case(
                    "too large maxRuns",
                    "POST",
                    "recovery/claim",
                    a.token(),
                    "application/json",
                    "{\"maxRuns\":5001}",
                    400),
                new Case(
                    "huge maxRuns",
                    "POST",
                    "recovery/claim",
                    a.token(),
                    "application/json",
                    "{\"maxRuns\":99999999999999999999}",
                    400),
                new Case(
                    "maxRuns as text",
                    "POST",
                    "recovery/claim",
                    a.token(),
                    "application/json",
                    "{\"maxRuns\":\"5\"}",
                    400),
                new Case(
                    "maxRuns as fraction",
                    "POST",
                    "recovery/claim",
                    a.token(),
                    "application/json",
                    "{\"maxRuns\":5.5}",
                    400),
                new Case(
                    "maxRuns as boolean",
                    "POST",
                    "recovery/claim",
                    a.token(),
                    "application/json",
                    "{\"maxRuns\":true}",
                    400),
                new Case(
                    "claim malformed",
                    "POST",
                    "recovery/claim",
                    a.token(),
                    "application/json",
                    "{\"maxRuns\":",
                    400),
                new Case(
                    "complete without token",
                    "POST",
                    complete,
                    null,
                    "application/json",
                    "{\"fence\":1}",
                    401),
                new Case(
                    "complete of a malformed id",
                    "POST",
                    "recovery/batches/abc/complete",
                    a.token(),
                    "application/json",
                    "{\"fence\":1}",
                    404),
                new Case(
                    "complete of an unknown batch",
                    "POST",
                    "recovery/batches/999999999/complete",
                    a.token(),
                    "application/json",
                    "{\"fence\":1}",
                    404),
                new Case(
                    "complete without fence",
                    "POST",
                    complete,
                    a.token(),
                    "application/json",
                    "{}",
                    400),
                new Case(
                    "complete without body",
                    "POST",
                    complete,
                    a.token(),
                    "application/json",
                    "",
                    400),
                new Case(
                    "fence as text",
                    "POST",
                    complete,
                    a.token(),
                    "application/json",
                    "{\"fence\":\"1\"}",
                    400),
                new Case(
                    "fence zero",
                    "POST",
                    complete,
                    a.token(),
                    "application/json",
                    "{\"fence\":0}",
                    400),
                new Case(
                    "stale fence",
                    "POST",
                    complete,
                    a.token(),
                    "application/json",
                    "{\"fence\":" + (batch.fence() + 1) + "}",
                    409),
                new Case(
                    "failedRunIds not a list",
                    "POST",
                    complete,
                    a.token(),
                    "application/json",
                    "{\"fence\":1,\"failedRunIds\":\"x\"}",
                    400),
                new Case(
                    "failedRunIds with numbers",
                    "POST",
                    complete,
                    a.token(),
                    "application/json",
                    "{\"fence\":1,\"failedRunIds\":[1]}",
                    400),
                new Case(
                    "failedRunIds injection",
                    "POST",
                    complete,
                    a.token(),
                    "application/json",
                    "{\"fence\":1,\"failedRunIds\":[\"x' OR '1'='1\"]}",
                    400),
                new Case(
                    "complete by another namespace",
                    "POST",
                    complete,
                    other.token(),
                    "application/json",
                    "{\"fence\":1}",
                    404),
                new Case("unknown path", "GET", "nothing-here", null, null, null, 404),
                new Case("wrong method", "GET", "recovery/claim", a.token(), null, null, 405)));

    String before = state();
    HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
    List<String> failures = new ArrayList<>();
    for (Case c : cases) {
      HttpRequest.Builder req = HttpRequest.newBuilder(base.resolve(c.path()));
      if (c.bearer() != null) {
        req.header("Authorization", "Bearer " + c.bearer());
      }
      if (c.contentType() != null) {
        req.header("Content-Type", c.contentType());
      }
      req.method(
          c.method(),
          c.body() == null
              ? HttpRequest.BodyPublishers.noBody()
              : HttpRequest.BodyPublishers.ofString(c.body()));
      HttpResponse<String> r = http.send(req.build(), HttpResponse.BodyHandlers.ofString());
      String type = r.headers().firstValue("Content-Type").orElse("");
      if (r.statusCode() != c.status()) {
        failures.add(
            c.label() + ": expected " + c.status() + " got " + r.statusCode() + " " + r.body());
      } else if (!type.startsWith("application/problem+json")) {
        failures.add(c.label() + ": not a problem document: " + type + " " + r.body());
      } else {
        var body = Api.JSON.readTree(r.body());
        if (!body.path("type").asText().startsWith("urn:rollcall:problem:")
            || body.path("status").asInt() != c.status()
            || r.body().contains("Exception")) {
          failures.add(c.label() + ": bad problem " + r.body());
        }
      }
    }
    assertEquals(List.of(), failures);
    assertEquals(before, state(), "no state change");
    assertTrue(cases.size() >= 45);
  }

  /** A fingerprint of everything a request could change. */
  static String state() {
    return Stream.of(
            "SELECT count(*) || ':' || coalesce(md5(string_agg(id::text || state"
                + " || lease_expires_at::text, ',' ORDER BY id)), '') FROM rollcall.instances",
            "SELECT count(*) || ':' || coalesce(md5(string_agg(id::text || state"
                + " || coalesce(scan_cursor, '') || scan_done::text, ',' ORDER BY id)), '')"
                + " FROM rollcall.epochs",
            "SELECT count(*) || ':' || coalesce(md5(string_agg(id::text || state || fence::text"
                + " || coalesce(lease_expires_at::text, ''), ',' ORDER BY id)), '')"
                + " FROM rollcall.batches",
            "SELECT count(*) || ':' || coalesce(md5(string_agg(id::text || outcome, ','"
                + " ORDER BY id)), '') FROM rollcall.ledger",
            "SELECT count(*) || ':' || coalesce(md5(string_agg(instance_id::text || run_id, ','"
                + " ORDER BY instance_id, run_id)), '') FROM rollcall.ownership")
        .map(sql -> Db.column(sql).get(0))
        .reduce((x, y) -> x + "|" + y)
        .orElseThrow();
  }
}
