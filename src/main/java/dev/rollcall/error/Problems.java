package dev.rollcall.error;

import java.util.Map;
import java.util.UUID;

/** The domain's refusals, one class per {@link ProblemType} a caller can be refused with. */
public final class Problems {

  private Problems() {}

  /** The request is well-formed JSON but says something the service cannot accept. */
  public static final class InvalidRequest extends DomainException {
    public InvalidRequest(String detail) {
      super(detail);
    }

    @Override
    public ProblemType type() {
      return ProblemType.INVALID_REQUEST;
    }
  }

  /** No credentials, or credentials that match nothing. */
  public static final class Unauthorized extends DomainException {
    public Unauthorized(String detail) {
      super(detail);
    }

    @Override
    public ProblemType type() {
      return ProblemType.UNAUTHORIZED;
    }
  }

  /** Valid credentials of someone who may not act on this resource. */
  public static final class Forbidden extends DomainException {
    public Forbidden(String detail) {
      super(detail);
    }

    @Override
    public ProblemType type() {
      return ProblemType.FORBIDDEN;
    }
  }

  /** A namespace that this service is not configured for. */
  public static final class UnknownNamespace extends DomainException {
    public UnknownNamespace(String namespace) {
      super("namespace '" + namespace + "' is not configured", Map.of("namespace", namespace));
    }

    @Override
    public ProblemType type() {
      return ProblemType.UNKNOWN_NAMESPACE;
    }
  }

  /** The instance left or missed its lease: it is fenced and must register again. */
  public static final class InstanceGone extends DomainException {
    public InstanceGone(UUID instanceId) {
      super(
          "instance "
              + instanceId
              + " is no longer live (it left or its lease expired); register again as a new"
              + " instance",
          Map.of("instanceId", instanceId.toString()));
    }

    @Override
    public ProblemType type() {
      return ProblemType.INSTANCE_GONE;
    }
  }

  /** A batch id that does not exist in the caller's namespace. */
  public static final class BatchNotFound extends DomainException {
    public BatchNotFound(long batchId) {
      super("batch " + batchId + " does not exist", Map.of("batchId", batchId));
    }

    @Override
    public ProblemType type() {
      return ProblemType.BATCH_NOT_FOUND;
    }
  }

  /** A complete whose fence is not the batch's current one: the batch was re-leased. */
  public static final class StaleFence extends DomainException {
    public StaleFence(long batchId, int given, int current) {
      super(
          "batch "
              + batchId
              + " was re-leased: fence "
              + given
              + " is stale (current fence "
              + current
              + "); another claimer owns these runs now",
          Map.of("batchId", batchId, "fence", given, "currentFence", current));
    }

    @Override
    public ProblemType type() {
      return ProblemType.STALE_FENCE;
    }
  }

  /** A namespace's run source could not be read. */
  public static final class SourceUnavailable extends DomainException {
    public SourceUnavailable(String namespace, String why) {
      super(
          "the run source of namespace '" + namespace + "' cannot be read: " + why,
          Map.of("namespace", namespace));
    }

    @Override
    public ProblemType type() {
      return ProblemType.SOURCE_UNAVAILABLE;
    }
  }

  /**
   * The database of a namespace cannot serve it now: unreachable when the service started, so its
   * schema is not migrated yet (the migration is retried until it succeeds).
   */
  public static final class DatabaseUnavailable extends DomainException {
    public DatabaseUnavailable(String database, String why) {
      super("database '" + database + "' is unavailable: " + why, Map.of("database", database));
    }

    @Override
    public ProblemType type() {
      return ProblemType.DATABASE_UNAVAILABLE;
    }
  }

  /** A request that contradicts the current state (a pass already open, an instance not live). */
  public static final class Conflict extends DomainException {
    public Conflict(String detail) {
      super(detail);
    }

    @Override
    public ProblemType type() {
      return ProblemType.CONFLICT;
    }
  }

  /** An admin lookup of something that does not exist. */
  public static final class NotFound extends DomainException {
    public NotFound(String what) {
      super(what + " does not exist");
    }

    @Override
    public ProblemType type() {
      return ProblemType.NOT_FOUND;
    }
  }

  /** An instance asking faster than its rate limit allows. */
  public static final class RateLimited extends DomainException {
    public RateLimited(String what, int perSecond, long retryAfterMs) {
      super(
          "more than " + perSecond + " " + what + " per second from this instance; slow down",
          Map.of("retryAfterMs", retryAfterMs));
    }

    @Override
    public ProblemType type() {
      return ProblemType.RATE_LIMITED;
    }
  }
}
