package dev.rollcall.model;

import jakarta.persistence.Column;
import jakarta.persistence.Entity;
import jakarta.persistence.Id;
import jakarta.persistence.IdClass;
import jakarta.persistence.Table;
import java.io.Serializable;
import java.time.OffsetDateTime;
import java.util.UUID;
import org.hibernate.annotations.Immutable;

/**
 * A run of a batch leased now ({@code rollcall.hand_outs_in_flight}, a view over the batch and its
 * runs): a hand-out whose ledger row is written with its outcome (V18). Read-only.
 */
@Entity
@Immutable
@IdClass(HandOutInFlight.Key.class)
@Table(name = "hand_outs_in_flight")
public class HandOutInFlight {

  /** One run of one batch. */
  public record Key(long batchId, String runId) implements Serializable {}

  @Id
  @Column(name = "batch_id", columnDefinition = "int8")
  public long batchId;

  @Id
  @Column(name = "run_id", columnDefinition = "text")
  public String runId;

  @Column(name = "namespace", columnDefinition = "text")
  public String namespace;

  @Column(name = "epoch_id", columnDefinition = "int8")
  public long epochId;

  @Column(name = "fence", columnDefinition = "int4")
  public int fence;

  @Column(name = "instance_id", columnDefinition = "uuid")
  public UUID instanceId;

  @Column(name = "reason", columnDefinition = "text")
  public String reason;

  @Column(name = "detail", columnDefinition = "text")
  public String detail;

  @Column(name = "recorded_at", columnDefinition = "timestamptz")
  public OffsetDateTime recordedAt;
}
