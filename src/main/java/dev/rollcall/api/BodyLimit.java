package dev.rollcall.api;

import dev.rollcall.error.ProblemType;
import io.quarkus.runtime.configuration.MemorySize;
import io.vertx.core.json.Json;
import io.vertx.ext.web.Router;
import jakarta.enterprise.context.ApplicationScoped;
import jakarta.enterprise.event.Observes;
import java.util.LinkedHashMap;
import java.util.Map;
import org.eclipse.microprofile.config.inject.ConfigProperty;

/**
 * Refuses a request whose declared length is over {@code quarkus.http.limits.max-body-size} with a
 * problem document before its body is read. (The HTTP layer enforces the same limit for bodies
 * without a length, with a bare 413.)
 */
@ApplicationScoped
public class BodyLimit {

  void install(
      @Observes Router router,
      @ConfigProperty(name = "quarkus.http.limits.max-body-size") MemorySize limit) {
    long max = limit.asLongValue();
    router
        .route()
        .order(Integer.MIN_VALUE)
        .handler(
            ctx -> {
              String length = ctx.request().getHeader("Content-Length");
              if (length != null && isOver(length, max)) {
                Map<String, Object> problem = new LinkedHashMap<>();
                ProblemType type = ProblemType.PAYLOAD_TOO_LARGE;
                problem.put("type", Problem.TYPE_PREFIX + type.slug());
                problem.put("title", type.title());
                problem.put("status", type.status());
                problem.put("detail", "request bodies are limited to " + max + " bytes");
                problem.put("limit", max);
                ctx.response()
                    .setStatusCode(type.status())
                    .putHeader("Content-Type", Problem.MEDIA_TYPE)
                    .putHeader("Connection", "close")
                    .end(Json.encode(problem));
                return;
              }
              ctx.next();
            });
  }

  private static boolean isOver(String length, long max) {
    try {
      return Long.parseLong(length.trim()) > max;
    } catch (NumberFormatException e) {
      return false;
    }
  }
}
