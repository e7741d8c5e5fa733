package dev.rollcall.error;

import java.util.Map;

/**
 * A refusal the service explains to its caller. Each subclass names its {@link ProblemType}, which
 * carries the slug, title and HTTP status; {@code ProblemMapper} writes the document. Extension
 * members carry the ids the caller needs to act on it.
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

  /** The problem type: its slug, title and status. */
  public abstract ProblemType type();

  /** Extra members of the problem document (ids, limits). */
  public Map<String, Object> extensions() {
    return extensions;
  }
}
