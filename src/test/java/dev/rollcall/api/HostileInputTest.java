package dev.rollcall.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.testing.Api;
import dev.rollcall.testing.Api.Batch;
import dev.rollcall.testing.Api.Instance;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.RollcallTestResource;
import dev.rollcall.testing.ServiceTest;
import dev.rollcall.testing.SourceTables;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Test;

/**
 * Hundreds of generated hostile requests — wrong types, oversized values, injection strings in
 * every field, other namespaces' credentials, replayed stale fences — against every endpoint: zero
 * 5xx, zero state changes, every answer a problem document.
 */
@ServiceTest
class HostileInputTest extends ApiTestBase {

  /** Strings that have broken other services' parsers, queries, logs and pages. */
  static final List<String> INJECTIONS =
      List.of(
          "' OR '1'='1",
          "\"; DROP TABLE rollcall.instances; --",
          "<script>alert(1)</script>",
          "${jndi:ldap://127.0.0.1/x}",
          "../../../../etc/passwd",
          "%s%s%s%n",
          "\u202eevil",
          "wrun_$(reboot)",
          "{{7*7}}",
          "ǅ\uD83D\uDE00\u0301");

  /** JSON values of the wrong type, or out of bounds, for any field. */
  static final List<String> WRONG =
      List.of(
          "null",
          "123",
          "true",
          "[]",
          "{}",
          "1.5",
          "\"\"",
          "\"   \"",
          "\"" + "x".repeat(5000) + "\"",
          "\"a\\u0000b\"",
          "\"a\\nb\"");

  record Attempt(String label, String method, String path, String token, String body) {}

  @Test
  void generatedHostileRequestsNeverCauseA5xxAStateChangeOrAnythingButAProblem() {
    String deploy = UUID.randomUUID().toString();
    Instance a = api.register(SourceTables.SMALL, deploy, "a");
    Instance other = api.register(SourceTables.GROWING, deploy, "other");
    Batch batch = api.claimBatch(a, 3);
    String secret = SourceTables.secret(SourceTables.SMALL);
    String admin = RollcallTestResource.ADMIN_TOKEN;
    String hb = "instances/" + a.id() + "/heartbeat";
    String complete = "recovery/batches/" + batch.id() + "/complete";
    List<Attempt> attempts = new ArrayList<>();

    for (String field : List.of("namespace", "deploymentId", "name")) {
      for (String v : WRONG) {
        attempts.add(
            new Attempt(
                "register " + field + "=" + v, "POST", "instances", secret, register(field, v)));
      }
    }
    for (String v : INJECTIONS) {
      // HTTP headers carry visible ASCII only (the client refuses anything else).
      String header = v.chars().allMatch(c -> c >= 0x20 && c < 0x7f) ? v : "rci_x" + v.length();
      attempts.add(
          new Attempt(
              "register namespace " + v,
              "POST",
              "instances",
              secret,
              register("namespace", json(v))));
      attempts.add(
          new Attempt(
              "register with injected secret " + v,
              "POST",
              "instances",
              header,
              register("name", "\"n\"")));
      attempts.add(
          new Attempt("claim with injected token " + v, "POST", "recovery/claim", header, "{}"));
      attempts.add(
          new Attempt(
              "complete failed " + v,
              "POST",
              complete,
              a.token(),
              "{\"fence\":" + batch.fence() + ",\"failedRunIds\":[" + json(v) + "]}"));
      attempts.add(
          new Attempt(
              "admin instances state " + v, "GET", "admin/instances?state=" + enc(v), admin, null));
      attempts.add(
          new Attempt("admin epochs kind " + v, "GET", "admin/epochs?kind=" + enc(v), admin, null));
      attempts.add(
          new Attempt(
              "admin epochs state " + v, "GET", "admin/epochs?state=" + enc(v), admin, null));
      attempts.add(
          new Attempt("admin cursor " + v, "GET", "admin/epochs?cursor=" + enc(v), admin, null));
      attempts.add(
          new Attempt(
              "admin run in namespace " + v,
              "GET",
              "admin/runs/wrun_1?namespace=" + enc(v),
              admin,
              null));
      attempts.add(
          new Attempt(
              "admin manual pass of " + v,
              "POST",
              "admin/epochs",
              admin,
              "{\"namespace\":" + json(v) + ",\"kind\":\"manual\"}"));
      attempts.add(
          new Attempt(
              "admin pass of kind " + v,
              "POST",
              "admin/epochs",
              admin,
              "{\"namespace\":\"small\",\"kind\":" + json(v) + "}"));
      attempts.add(
          new Attempt(
              "admin switch of " + v,
              "PUT",
              "admin/namespaces/" + enc(v) + "/recovery",
              admin,
              "{\"bootRecovery\":true}"));
      attempts.add(
          new Attempt("admin with injected token " + v, "GET", "admin/namespaces", header, null));
    }
    for (String v :
        List.of(
            "123",
            "\"x\"",
            "[1]",
            "[null]",
            "[\"" + "r".repeat(300) + "\"]",
            "{}",
            "true",
            "[{}]",
            "[{\"runId\":[]}]",
            "[{\"runId\":\"wrun_1\",\"messageId\":{}}]",
            "[{\"runId\":\"wrun_1\",\"messageId\":\"" + "m".repeat(300) + "\"}]")) {
      attempts.add(
          new Attempt(
              "workerIds " + v,
              "POST",
              "instances",
              secret,
              "{\"namespace\":\"small\",\"deploymentId\":\"d\",\"name\":\"n\",\"workerIds\":"
                  + v
                  + "}"));
      attempts.add(new Attempt("inFlight " + v, "POST", hb, a.token(), "{\"inFlight\":" + v + "}"));
      attempts.add(
          new Attempt(
              "leave inFlight " + v,
              "DELETE",
              "instances/" + a.id(),
              a.token(),
              "{\"inFlight\":" + v + "}"));
    }
    for (String v :
        List.of(
            "-1", "0", "5001", "\"5\"", "5.5", "true", "[]", "{}", "1e309", "2147483648", "null")) {
      if (!v.equals("null")) {
        attempts.add(
            new Attempt(
                "maxRuns " + v, "POST", "recovery/claim", a.token(), "{\"maxRuns\":" + v + "}"));
      }
      attempts.add(new Attempt("fence " + v, "POST", complete, a.token(), "{\"fence\":" + v + "}"));
    }
    for (int stale = 1; stale <= 5; stale++) {
      attempts.add(
          new Attempt(
              "replayed fence +" + stale,
              "POST",
              complete,
              a.token(),
              "{\"fence\":" + (batch.fence() + stale) + "}"));
    }
    for (String token : List.of(other.token(), secret, admin, "rci_" + "A".repeat(43))) {
      attempts.add(new Attempt("heartbeat with a foreign credential", "POST", hb, token, "{}"));
      attempts.add(
          new Attempt(
              "complete with a foreign credential",
              "POST",
              complete,
              token,
              "{\"fence\":" + batch.fence() + "}"));
      attempts.add(
          new Attempt(
              "leave with a foreign credential", "DELETE", "instances/" + a.id(), token, null));
      if (!token.equals(admin)) {
        attempts.add(
            new Attempt(
                "admin with a foreign credential",
                "POST",
                "admin/instances/" + a.id() + "/evict",
                token,
                null));
      }
    }

    String before = BadInputTest.state();
    List<String> failures = new ArrayList<>();
    for (Attempt t : attempts) {
      Api.Reply r;
      try {
        r = api.send(t.method(), t.path(), t.token(), t.body());
      } catch (RuntimeException e) {
        failures.add(t.label() + ": " + e);
        continue;
      }
      if (r.status() < 400 || r.status() >= 500) {
        failures.add(t.label() + ": HTTP " + r.status() + " " + r.raw());
      } else if (!r.contentType().startsWith("application/problem+json")
          || r.body() == null
          || !r.body().path("type").asText().startsWith("urn:rollcall:problem:")
          || r.raw().contains("Exception")) {
        failures.add(t.label() + ": not a clean problem: " + r.contentType() + " " + r.raw());
      }
    }
    assertEquals(List.of(), failures);
    assertEquals(before, BadInputTest.state(), "no state change");
    assertTrue(attempts.size() >= 200, "attempts: " + attempts.size());
    api.complete(a, batch, List.of()).expect(200);
  }

  static String register(String field, String value) {
    String ns = field.equals("namespace") ? value : "\"small\"";
    String dep = field.equals("deploymentId") ? value : "\"d\"";
    String name = field.equals("name") ? value : "\"n\"";
    return "{\"namespace\":" + ns + ",\"deploymentId\":" + dep + ",\"name\":" + name + "}";
  }

  static String json(String s) {
    try {
      return Api.JSON.writeValueAsString(s);
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  static String enc(String s) {
    return URLEncoder.encode(s, StandardCharsets.UTF_8);
  }
}
