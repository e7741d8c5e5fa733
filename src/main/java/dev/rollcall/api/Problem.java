package dev.rollcall.api;

import com.fasterxml.jackson.annotation.JsonAnyGetter;
import com.fasterxml.jackson.annotation.JsonInclude;
import jakarta.ws.rs.core.Response;
import java.util.Map;

/**
 * An RFC 9457 problem document. {@code type} is a stable URN per problem kind; clients switch on
 * it, never on {@code title} or {@code detail}.
 */
@JsonInclude(JsonInclude.Include.NON_NULL)
public record Problem(
    String type, String title, int status, String detail, Map<String, Object> extensions) {

  /** The media type of every error response. */
  public static final String MEDIA_TYPE = "application/problem+json";

  /** Problem type URNs are {@code urn:rollcall:problem:<slug>}. */
  public static final String TYPE_PREFIX = "urn:rollcall:problem:";

  /** A problem of the given slug. */
  public static Problem of(
      String slug, String title, int status, String detail, Map<String, Object> extensions) {
    return new Problem(TYPE_PREFIX + slug, title, status, detail, extensions);
  }

  @JsonAnyGetter
  @Override
  public Map<String, Object> extensions() {
    return extensions;
  }

  /** The HTTP response carrying this problem. */
  public Response toResponse() {
    return Response.status(status).type(MEDIA_TYPE).entity(this).build();
  }
}
