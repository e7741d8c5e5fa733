package dev.rollcall.testing;

import io.quarkus.test.common.http.TestHTTPResource;
import java.net.URI;
import org.junit.jupiter.api.BeforeEach;

/** A service test that talks to the service over HTTP with a fresh {@link Api}. */
public abstract class ApiTestBase {

  /** The service's API root. */
  @TestHTTPResource("/")
  protected URI base;

  /** A client of the service. */
  protected Api api;

  @BeforeEach
  void client() {
    api = new Api(base);
  }
}
