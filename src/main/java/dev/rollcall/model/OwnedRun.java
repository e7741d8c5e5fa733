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
 * A run in an instance's last in-flight report ({@code rollcall.ownership}). Heartbeats replace
 * these rows in bulk ({@code registry.Ownership}); the control plane only reads them.
 */
@Entity
@Immutable
@IdClass(OwnedRun.Key.class)
@Table(name = "ownership")
public class OwnedRun {

  /** The primary key. */
  public record Key(UUID instanceId, String runId) implements Serializable {}

  @Id
  @Column(name = "instance_id", columnDefinition = "uuid")
  public UUID instanceId;

  @Id
  @Column(name = "run_id", columnDefinition = "text")
  public String runId;

  @Column(name = "namespace", columnDefinition = "text")
  public String namespace;

  @Column(name = "reported_at", columnDefinition = "timestamptz")
  public OffsetDateTime reportedAt;
}
