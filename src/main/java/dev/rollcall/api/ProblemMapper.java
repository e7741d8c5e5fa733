package dev.rollcall.api;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonMappingException;
import com.fasterxml.jackson.databind.exc.InvalidFormatException;
import com.fasterxml.jackson.databind.exc.MismatchedInputException;
import com.fasterxml.jackson.databind.exc.UnrecognizedPropertyException;
import dev.rollcall.error.DomainException;
import dev.rollcall.error.Problems;
import io.vertx.pgclient.PgException;
import io.vertx.sqlclient.ClosedConnectionException;
import jakarta.ws.rs.WebApplicationException;
import jakarta.ws.rs.core.Response;
import java.net.ConnectException;
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

  /** Status code of every domain problem type. */
  static final Map<Class<? extends DomainException>, Integer> STATUS =
      Map.ofEntries(
          Map.entry(Problems.InvalidRequest.class, 400),
          Map.entry(Problems.Unauthorized.class, 401),
          Map.entry(Problems.Forbidden.class, 403),
          Map.entry(Problems.UnknownNamespace.class, 404),
          Map.entry(Problems.BatchNotFound.class, 404),
          Map.entry(Problems.NotFound.class, 404),
          Map.entry(Problems.StaleFence.class, 409),
          Map.entry(Problems.Conflict.class, 409),
          Map.entry(Problems.InstanceGone.class, 410),
          Map.entry(Problems.RateLimited.class, 429),
          Map.entry(Problems.SourceUnavailable.class, 503));

  /**
   * A domain problem becomes its status. A domain exception without a status here is a bug of this
   * service, not of the request: it answers {@code 500 internal-error} (logged with an error id),
   * never a guessed {@code 400}.
   */
  @ServerExceptionMapper
  public Response domain(DomainException e) {
    Integer status = STATUS.get(e.getClass());
    if (status == null) {
      return internal(e);
    }
    Response response =
        Problem.of(e.slug(), e.title(), status, e.getMessage(), e.extensions()).toResponse();
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
    return Problem.of(
            "malformed-json", "Malformed JSON", 400, "the request body is not valid JSON", Map.of())
        .toResponse();
  }

  @ServerExceptionMapper
  public Response web(WebApplicationException e) {
    int status = e.getResponse().getStatus();
    if (status >= 500) {
      return internal(e);
    }
    String slug =
        switch (status) {
          case 400 -> "invalid-request";
          case 401 -> "unauthorized";
          case 403 -> "forbidden";
          case 404 -> "not-found";
          case 405 -> "method-not-allowed";
          case 406 -> "not-acceptable";
          case 413 -> "payload-too-large";
          case 415 -> "unsupported-media-type";
          default -> "http-" + status;
        };
    Response.StatusType info = e.getResponse().getStatusInfo();
    return Problem.of(slug, info.getReasonPhrase(), status, info.getReasonPhrase(), Map.of())
        .toResponse();
  }

  @ServerExceptionMapper
  public Response unexpected(Throwable e) {
    if (databaseUnreachable(e)) {
      LOG.warnf("database unreachable: %s", e.toString());
      return Problem.of(
              "database-unavailable",
              "Database unavailable",
              503,
              "the database cannot be reached; retry later",
              Map.of())
          .toResponse();
    }
    return internal(e);
  }

  private static Response internal(Throwable e) {
    String errorId = UUID.randomUUID().toString();
    LOG.errorf(e, "unexpected failure (error id %s)", errorId);
    return Problem.of(
            "internal-error",
            "Internal error",
            500,
            "an unexpected error occurred; the server log has it under this error id",
            Map.of("errorId", errorId))
        .toResponse();
  }

  private static Response invalidJson(String detail) {
    return Problem.of("invalid-request", "Invalid request", 400, detail, Map.of()).toResponse();
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
