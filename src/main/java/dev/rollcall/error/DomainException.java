package dev.rollcall.error;

import java.util.Map;

/**
 * A refusal the service explains to its caller. Each subclass is one problem type; the API maps it
 * to an HTTP status in one place ({@code ProblemMapper}). Extension members carry the ids the
 * caller needs to act on it.
 */
public abstract class DomainException extends RuntimeException {

  private final Map<String, Object> extensions;

  protected DomainException(String detail, Map<String, Object> extensions) {
    super(detail, null, false, false);
    this.extensions = Map.copyOf(extensions);
  }

  protected DomainException(String detail) {
    this(detail, Map.of());
  }

  /** The stable slug of this problem type, for example {@code stale-fence}. */
  public abstract String slug();

  /** A short, stable, human-readable summary of the problem type. */
  public abstract String title();

  /** Extra members of the problem document (ids, limits). */
  public Map<String, Object> extensions() {
    return extensions;
  }
}
