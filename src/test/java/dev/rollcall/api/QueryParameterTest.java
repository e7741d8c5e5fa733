package dev.rollcall.api;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.rollcall.testing.Api;
import dev.rollcall.testing.ApiTestBase;
import dev.rollcall.testing.RollcallTestResource;
import dev.rollcall.testing.ServiceTest;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Query parameters are checked like body fields: a NUL byte is the caller's error, not a 500. */
@ServiceTest
class QueryParameterTest extends ApiTestBase {

  @Test
  void aNulByteOrAControlCharacterInAnAdminQueryParameterIsA400() {
    for (String path :
        List.of(
            "admin/instances?namespace=%00",
            "admin/instances?namespace=a%00b",
            "admin/epochs?namespace=%00",
            "admin/epochs?namespace=x%01y",
            "admin/instances?cursor=%00",
            "admin/epochs?cursor=%00")) {
      Api.Reply r = api.send("GET", path, RollcallTestResource.ADMIN_TOKEN, null);
      assertEquals(400, r.status(), path + ": " + r.raw());
      assertEquals("urn:rollcall:problem:invalid-request", r.text("type"), path);
    }
  }
}
