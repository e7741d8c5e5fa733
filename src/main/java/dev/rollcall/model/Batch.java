package dev.rollcall.model;

import jakarta.persistence.Column;
import jakarta.persistence.Entity;
import jakarta.persistence.Id;
import jakarta.persistence.Table;
import java.time.OffsetDateTime;
import java.util.UUID;
import org.hibernate.annotations.Immutable;

/**
 * A page of runs cut from an epoch ({@code rollcall.batches}). Read-only here: batches are cut,
 * leased, re-leased under a new fence and completed by recovery's guarded statements.
 */
@Entity
@Immutable
@Table(name = "batches")
public class Batch {

  @Id
  @Column(name = "id", columnDefinition = "int8")
  public long id;

  @Column(name = "epoch_id", columnDefinition = "int8")
  public long epochId;

  @Column(name = "state", columnDefinition = "text")
  public String state;

  @Column(name = "fence", columnDefinition = "int4")
  public int fence;

  @Column(name = "attempts", columnDefinition = "int4")
  public int attempts;

  @Column(name = "claimer_id", columnDefinition = "uuid")
  public UUID claimerId;

  @Column(name = "lease_expires_at", columnDefinition = "timestamptz")
  public OffsetDateTime leaseExpiresAt;

  @Column(name = "run_count", columnDefinition = "int4")
  public int runCount;

  @Column(name = "created_at", columnDefinition = "timestamptz")
  public OffsetDateTime createdAt;

  @Column(name = "completed_at", columnDefinition = "timestamptz")
  public OffsetDateTime completedAt;

  /** The batch whose failed runs this one hands out again. */
  @Column(name = "retry_of", columnDefinition = "int8")
  public Long retryOf;
}
