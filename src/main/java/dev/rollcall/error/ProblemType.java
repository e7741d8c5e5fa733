package dev.rollcall.error;

/**
 * Every problem type the service answers with: its stable slug (the end of the {@code type} URN
 * clients switch on), its title and its HTTP status. The one table of them: domain exceptions name
 * their type, the mapper reads the status here, and the OpenAPI document lists these slugs.
 */
public enum ProblemType {
  INVALID_REQUEST("invalid-request", "Invalid request", 400),
  MALFORMED_JSON("malformed-json", "Malformed JSON", 400),
  UNAUTHORIZED("unauthorized", "Missing or invalid credentials", 401),
  FORBIDDEN("forbidden", "Not allowed for these credentials", 403),
  UNKNOWN_NAMESPACE("unknown-namespace", "Unknown namespace", 404),
  BATCH_NOT_FOUND("batch-not-found", "Batch not found", 404),
  NOT_FOUND("not-found", "Not found", 404),
  METHOD_NOT_ALLOWED("method-not-allowed", "Method Not Allowed", 405),
  NOT_ACCEPTABLE("not-acceptable", "Not Acceptable", 406),
  STALE_FENCE("stale-fence", "Stale batch fence", 409),
  CONFLICT("conflict", "Conflicts with the current state", 409),
  INSTANCE_GONE("instance-gone", "Instance is no longer live", 410),
  PAYLOAD_TOO_LARGE("payload-too-large", "Request body too large", 413),
  UNSUPPORTED_MEDIA_TYPE("unsupported-media-type", "Unsupported Media Type", 415),
  RATE_LIMITED("rate-limited", "Too many requests", 429),
  INTERNAL_ERROR("internal-error", "Internal error", 500),
  SOURCE_UNAVAILABLE("source-unavailable", "Run source unavailable", 503),
  DATABASE_UNAVAILABLE("database-unavailable", "Database unavailable", 503);

  private final String slug;
  private final String title;
  private final int status;

  ProblemType(String slug, String title, int status) {
    this.slug = slug;
    this.title = title;
    this.status = status;
  }

  /** The stable slug, for example {@code stale-fence}. */
  public String slug() {
    return slug;
  }

  /** A short, stable, human-readable summary. */
  public String title() {
    return title;
  }

  /** The HTTP status of a response of this type. */
  public int status() {
    return status;
  }
}
