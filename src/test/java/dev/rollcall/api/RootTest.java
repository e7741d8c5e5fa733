package dev.rollcall.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rollcall.testing.Api;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.ServiceTest;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import org.junit.jupiter.api.Test;

/** {@code /} leads to the admin console. */
@ServiceTest
class RootTest extends ApiTestBase {

  @Test
  void theRootRedirectsToTheConsole() throws Exception {
    Api.Reply root = api.send("GET", "", null, null);
    assertEquals(303, root.status(), root.raw());
    HttpResponse<String> followed =
        HttpClient.newBuilder()
            .followRedirects(HttpClient.Redirect.NORMAL)
            .build()
            .send(HttpRequest.newBuilder(base).build(), HttpResponse.BodyHandlers.ofString());
    assertEquals(200, followed.statusCode());
    assertTrue(followed.uri().getPath().startsWith("/console"), followed.uri().toString());
    assertTrue(followed.body().contains("<html"), followed.body());
  }
}
