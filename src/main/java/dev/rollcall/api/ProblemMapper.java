package dev.rollcall.api;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonMappingException;
import com.fasterxml.jackson.databind.exc.InvalidFormatException;
import com.fasterxml.jackson.databind.exc.MismatchedInputException;
import com.fasterxml.jackson.databind.exc.UnrecognizedPropertyException;
import dev.rollcall.error.DomainException;
import dev.rollcall.error.ProblemType;
import dev.rollcall.error.Problems;
import io.vertx.pgclient.PgException;
import io.vertx.sqlclient.ClosedConnectionException;
import jakarta.ws.rs.WebApplicationException;
import jakarta.ws.rs.core.Response;
import java.net.ConnectException;
import java.net.SocketException;
import java.util.Map;
import java.util.UUID;
import java.util.stream.Collectors;
import org.jboss.logging.Logger;
import org.jboss.resteasy.reactive.server.ServerExceptionMapper;

/**
 * The one place where failures become HTTP responses. Every response is a problem document; no
 * stack trace or internal message leaves the server (unexpected failures are logged with an error
 * id that the response carries).
 */
public class ProblemMapper {

  private static final Logger LOG = Logger.getLogger(ProblemMapper.class);

  /** A domain problem becomes the status, title and slug its type carries. */
  @ServerExceptionMapper
  public Response domain(DomainException e) {
    Response response = of(e.type(), e.getMessage(), e.extensions());
    if (e instanceof Problems.RateLimited limited) {
      long ms = (Long) limited.extensions().get("retryAfterMs");
      return Response.fromResponse(response)
          .header("Retry-After", Math.max(1, (ms + 999) / 1000))
          .build();
    }
    return response;
  }

  @ServerExceptionMapper(priority = 1)
  public Response unknownField(UnrecognizedPropertyException e) {
    return invalidJson("unknown field '" + e.getPropertyName() + "'" + at(e));
  }

  @ServerExceptionMapper(priority = 1)
  public Response wrongType(InvalidFormatException e) {
    return invalidJson("wrong type of value" + at(e));
  }

  @ServerExceptionMapper(priority = 1)
  public Response mismatched(MismatchedInputException e) {
    return invalidJson("wrong type of value" + at(e));
  }

  @ServerExceptionMapper(priority = 1)
  public Response mapping(JsonMappingException e) {
    return invalidJson("the body does not fit the request" + at(e));
  }

  @ServerExceptionMapper(priority = 1)
  public Response malformed(JsonProcessingException e) {
    return of(ProblemType.MALFORMED_JSON, "the request body is not valid JSON", Map.of());
  }

  @ServerExceptionMapper
  public Response web(WebApplicationException e) {
    int status = e.getResponse().getStatus();
    if (status >= 500) {
      return internal(e);
    }
    ProblemType type =
        switch (status) {
          case 400 -> ProblemType.INVALID_REQUEST;
          case 401 -> ProblemType.UNAUTHORIZED;
          case 403 -> ProblemType.FORBIDDEN;
          case 404 -> ProblemType.NOT_FOUND;
          case 405 -> ProblemType.METHOD_NOT_ALLOWED;
          case 406 -> ProblemType.NOT_ACCEPTABLE;
          case 413 -> ProblemType.PAYLOAD_TOO_LARGE;
          case 415 -> ProblemType.UNSUPPORTED_MEDIA_TYPE;
          default -> null;
        };
    String slug = type == null ? "http-" + status : type.slug();
    // The framework's own refusals keep its reason phrase as their title.
    Response.StatusType info = e.getResponse().getStatusInfo();
    return Problem.of(slug, info.getReasonPhrase(), status, info.getReasonPhrase(), Map.of())
        .toResponse();
  }

  @ServerExceptionMapper
  public Response unexpected(Throwable e) {
    if (databaseUnreachable(e)) {
      LOG.warnf("database unreachable: %s", e.toString());
      return of(
          ProblemType.DATABASE_UNAVAILABLE,
          "the database cannot be reached; retry later",
          Map.of());
    }
    return internal(e);
  }

  private static Response internal(Throwable e) {
    String errorId = UUID.randomUUID().toString();
    LOG.errorf(e, "unexpected failure (error id %s)", errorId);
    return of(
        ProblemType.INTERNAL_ERROR,
        "an unexpected error occurred; the server log has it under this error id",
        Map.of("errorId", errorId));
  }

  private static Response invalidJson(String detail) {
    return of(ProblemType.INVALID_REQUEST, detail, Map.of());
  }

  private static Response of(ProblemType type, String detail, Map<String, Object> extensions) {
    return Problem.of(type.slug(), type.title(), type.status(), detail, extensions).toResponse();
  }

  private static boolean unavailable(String sqlState) {
    return sqlState != null
        && (sqlState.startsWith("08")
            || sqlState.equals("57P01")
            || sqlState.equals("57P02")
            || sqlState.equals("57P03"));
  }

  private static String at(JsonMappingException e) {
    if (e.getPath() == null || e.getPath().isEmpty()) {
      return "";
    }
    return " at '"
        + e.getPath().stream()
            .map(r -> r.getFieldName() != null ? r.getFieldName() : "[" + r.getIndex() + "]")
            .collect(Collectors.joining("."))
        + "'";
  }

  static boolean databaseUnreachable(Throwable e) {
    for (Throwable t = e; t != null; t = t.getCause()) {
      if (t instanceof ConnectException || t instanceof ClosedConnectionException) {
        return true;
      }
      // The database's connection dropped under a request: a backend terminated
      // (pg_terminate_backend, a restart) often reaches the pool as a reset socket rather than as
      // the server's 57P01. The database is this service's only network peer on a request's path.
      if (t instanceof SocketException) {
        return true;
      }
      // The server itself says it cannot serve: a connection exception (class 08), or it is
      // shutting down, restarting or not yet accepting connections (57P01 admin shutdown, 57P02
      // crash shutdown, 57P03 cannot connect now). Seen while PostgreSQL restarts (ChaosIT);
      // without this those requests were 500 internal-error instead of a retryable 503.
      if (t instanceof PgException pg && unavailable(pg.getSqlState())) {
        return true;
      }
      String message = String.valueOf(t.getMessage());
      if (message.contains("Connection refused") || message.contains("connection is closed")) {
        return true;
      }
    }
    return false;
  }
}
