package dev.rollcall.api;

import dev.rollcall.api.dto.Dtos.InFlightEntry;
import dev.rollcall.api.dto.Dtos.SessionLockReport;
import dev.rollcall.error.Problems.InvalidRequest;
import dev.rollcall.error.Problems.Unauthorized;
import dev.rollcall.registry.Heartbeats;
import dev.rollcall.registry.InFlight;
import dev.rollcall.registry.SessionLiveness;
import dev.rollcall.registry.SessionLiveness.SessionReport;
import java.util.ArrayList;
import java.util.List;

/** Checks of request values, shared by the resources. Each failure names the field. */
final class Requests {

  /** The longest id, name or secret the API accepts. */
  static final int MAX_TEXT = 200;

  /** The most worker ids one instance may declare. */
  static final int MAX_WORKER_IDS = Heartbeats.MAX_WORKER_IDS;

  private Requests() {}

  static <T> T body(T body, String what) {
    if (body == null) {
      throw new InvalidRequest("a JSON body is required: " + what);
    }
    return body;
  }

  static String text(String value, String field) {
    String problem = problem(value);
    if (problem != null) {
      throw new InvalidRequest("'" + field + "' " + problem);
    }
    return value;
  }

  /**
   * Why {@link #text} refuses a value, or null. Apart from the field's name, which is built only
   * for a refusal: this runs for every id of every heartbeat.
   */
  private static String problem(String value) {
    if (value == null || value.isBlank()) {
      return "is required and must not be blank";
    }
    if (value.length() > MAX_TEXT) {
      return "is longer than " + MAX_TEXT + " characters";
    }
    for (int i = 0; i < value.length(); i++) {
      if (value.charAt(i) < 0x20) {
        return "contains control characters";
      }
    }
    return null;
  }

  /**
   * An optional value (a query parameter): null when absent, else checked like {@link #text}. A NUL
   * byte, which PostgreSQL refuses in any text value, is thus a 400 and never reaches a query.
   */
  static String optionalText(String value, String field) {
    return value == null ? null : text(value, field);
  }

  static List<String> texts(List<String> values, String field, int max) {
    if (values == null) {
      return List.of();
    }
    if (values.size() > max) {
      throw new InvalidRequest("'" + field + "' has more than " + max + " entries");
    }
    for (int i = 0; i < values.size(); i++) {
      text(values.get(i), field + "[" + i + "]");
    }
    return values;
  }

  /**
   * An {@code inFlight} list: each entry a run id, or an object with a run id and an optional
   * message id.
   */
  static List<InFlight> inFlight(List<InFlightEntry> entries, String field, int max) {
    if (entries.size() > max) {
      throw new InvalidRequest("'" + field + "' has more than " + max + " entries");
    }
    List<InFlight> out = new ArrayList<>(entries.size());
    for (int i = 0; i < entries.size(); i++) {
      InFlightEntry e = entries.get(i);
      if (e == null) {
        throw new InvalidRequest(
            "'" + field + "[" + i + "]' must be a run id or an object with a 'runId'");
      }
      String runIdProblem = problem(e.runId());
      if (runIdProblem != null) {
        String at = field + "[" + i + "]" + (e.messageId() == null ? "" : ".runId");
        throw new InvalidRequest("'" + at + "' " + runIdProblem);
      }
      String messageIdProblem = e.messageId() == null ? null : problem(e.messageId());
      if (messageIdProblem != null) {
        throw new InvalidRequest("'" + field + "[" + i + "].messageId' " + messageIdProblem);
      }
      out.add(new InFlight(e.runId(), e.messageId()));
    }
    return out;
  }

  static int range(Integer value, int fallback, int min, int max, String field) {
    if (value == null) {
      return fallback;
    }
    if (value < min || value > max) {
      throw new InvalidRequest("'" + field + "' must be between " + min + " and " + max);
    }
    return value;
  }

  /** The token of an {@code Authorization: Bearer <token>} header. */
  static String bearer(String header) {
    if (header == null || !header.regionMatches(true, 0, "Bearer ", 0, 7)) {
      throw new Unauthorized("an 'Authorization: Bearer <token>' header is required");
    }
    String token = header.substring(7).trim();
    if (token.isEmpty() || token.length() > 1000) {
      throw new Unauthorized("the bearer token is empty or too long");
    }
    return token;
  }

  /** A heartbeat's session lock report; {@code held} names the backend that holds it. */
  static SessionReport session(SessionLockReport report) {
    SessionLiveness.Report state =
        SessionLiveness.Report.parse(report.state())
            .orElseThrow(
                () ->
                    new InvalidRequest(
                        "'sessionLock.state' must be one of held, unavailable, lost"));
    if (state == SessionLiveness.Report.HELD && (report.pid() == null || report.pid() <= 0)) {
      throw new InvalidRequest("'sessionLock.pid' is required when the lock is held");
    }
    return new SessionReport(state, report.pid(), Boolean.TRUE.equals(report.reconnected()));
  }
}
