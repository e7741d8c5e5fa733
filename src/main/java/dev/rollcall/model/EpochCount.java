package dev.rollcall.model;

import jakarta.persistence.Column;
import jakarta.persistence.Entity;
import jakarta.persistence.Id;
import jakarta.persistence.IdClass;
import jakarta.persistence.Table;
import java.io.Serializable;
import org.hibernate.annotations.Immutable;

/**
 * Part of how many runs a pass deferred or skipped for one reason ({@code rollcall.epoch_counts}):
 * the count is the sum of its parts.
 */
@Entity
@Immutable
@IdClass(EpochCount.Key.class)
@Table(name = "epoch_counts")
public class EpochCount {

  /** The primary key. */
  public record Key(long epochId, String outcome, String reason, short part)
      implements Serializable {}

  @Id
  @Column(name = "epoch_id", columnDefinition = "int8")
  public long epochId;

  @Id
  @Column(name = "outcome", columnDefinition = "text")
  public String outcome;

  @Id
  @Column(name = "reason", columnDefinition = "text")
  public String reason;

  @Id
  @Column(name = "part", columnDefinition = "int2")
  public short part;

  @Column(name = "runs", columnDefinition = "int8")
  public long runs;
}
