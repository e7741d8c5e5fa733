package dev.rollcall.model;

import jakarta.persistence.Column;
import jakarta.persistence.Entity;
import jakarta.persistence.Id;
import jakarta.persistence.Table;
import java.time.OffsetDateTime;
import java.util.UUID;
import org.hibernate.annotations.Immutable;

/**
 * A recovery pass and its progress, read from the view {@code rollcall.epoch_progress} (migration
 * V10), which computes the counts when read. Read-only: epochs are opened, scanned and closed by
 * recovery's own statements.
 */
@Entity
@Immutable
@Table(name = "epoch_progress")
public class EpochProgress {

  @Id
  @Column(name = "id", columnDefinition = "int8")
  public long id;

  @Column(name = "namespace", columnDefinition = "text")
  public String namespace;

  @Column(name = "kind", columnDefinition = "text")
  public String kind;

  @Column(name = "state", columnDefinition = "text")
  public String state;

  @Column(name = "close_reason", columnDefinition = "text")
  public String closeReason;

  @Column(name = "deployment_id", columnDefinition = "text")
  public String deploymentId;

  @Column(name = "subject_instance_id", columnDefinition = "uuid")
  public UUID subjectInstanceId;

  @Column(name = "created_at", columnDefinition = "timestamptz")
  public OffsetDateTime createdAt;

  @Column(name = "closed_at", columnDefinition = "timestamptz")
  public OffsetDateTime closedAt;

  /** From creation to closing, or to now (the database's) while open. */
  @Column(name = "duration_ms", columnDefinition = "int8")
  public long durationMs;

  @Column(name = "scan_done", columnDefinition = "bool")
  public boolean scanDone;

  @Column(name = "runs_scanned", columnDefinition = "int8")
  public long runsScanned;

  /** Distinct runs handed out in a batch. */
  @Column(name = "handed_out", columnDefinition = "int8")
  public long handedOut;

  /** Distinct runs enqueued. */
  @Column(name = "enqueued", columnDefinition = "int8")
  public long enqueued;

  /** Hand-outs reported failed. */
  @Column(name = "failed", columnDefinition = "int8")
  public long failed;

  /** Deferrals of the pass. */
  @Column(name = "deferred", columnDefinition = "int8")
  public long deferred;

  /** Skips of the pass. */
  @Column(name = "skipped", columnDefinition = "int8")
  public long skipped;

  /** Deferred runs still waiting for their re-check. */
  @Column(name = "pending_recheck", columnDefinition = "int8")
  public long pendingRecheck;

  /** Leases that ran out (per batch and fence). */
  @Column(name = "expired", columnDefinition = "int8")
  public long expired;
}
