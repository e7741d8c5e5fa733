package dev.rollcall.model;

import jakarta.persistence.Column;
import jakarta.persistence.Entity;
import jakarta.persistence.Id;
import jakarta.persistence.Table;
import java.time.OffsetDateTime;
import java.util.UUID;
import org.hibernate.annotations.Immutable;

/**
 * One row of the ledger ({@code rollcall.ledger}): a run handed out, deferred, skipped or released,
 * and what became of it. Written in bulk by recovery's statements; read here.
 */
@Entity
@Immutable
@Table(name = "ledger")
public class LedgerRow {

  @Id
  @Column(name = "id", columnDefinition = "int8")
  public long id;

  @Column(name = "namespace", columnDefinition = "text")
  public String namespace;

  @Column(name = "run_id", columnDefinition = "text")
  public String runId;

  /** Null for a queue lock released outside any epoch. */
  @Column(name = "epoch_id", columnDefinition = "int8")
  public Long epochId;

  @Column(name = "batch_id", columnDefinition = "int8")
  public Long batchId;

  @Column(name = "fence", columnDefinition = "int4")
  public Integer fence;

  @Column(name = "instance_id", columnDefinition = "uuid")
  public UUID instanceId;

  @Column(name = "reason", columnDefinition = "text")
  public String reason;

  @Column(name = "outcome", columnDefinition = "text")
  public String outcome;

  @Column(name = "detail", columnDefinition = "text")
  public String detail;

  @Column(name = "recorded_at", columnDefinition = "timestamptz")
  public OffsetDateTime recordedAt;

  @Column(name = "resolved_at", columnDefinition = "timestamptz")
  public OffsetDateTime resolvedAt;
}
