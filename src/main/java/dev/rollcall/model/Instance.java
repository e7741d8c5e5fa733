package dev.rollcall.model;

import jakarta.persistence.Column;
import jakarta.persistence.Entity;
import jakarta.persistence.Id;
import jakarta.persistence.Table;
import java.time.OffsetDateTime;
import java.util.UUID;
import org.hibernate.annotations.Formula;
import org.hibernate.annotations.JdbcTypeCode;
import org.hibernate.type.SqlTypes;

/**
 * An application process registered with a namespace ({@code rollcall.instances}). Registration,
 * authentication and every lease change are statements of {@code registry.Registrations}, {@code
 * registry.Heartbeats} and {@code registry.Endings}; this entity is how the control plane reads
 * instances. Liveness is the database's rule ({@code rollcall.is_live}, {@code
 * rollcall.is_expired}) evaluated by the database in the query itself.
 */
@Entity
@Table(name = "instances")
public class Instance {

  @Id
  @Column(name = "id", columnDefinition = "uuid")
  public UUID id;

  @Column(name = "namespace", columnDefinition = "text")
  public String namespace;

  @Column(name = "deployment_id", columnDefinition = "text")
  public String deploymentId;

  @Column(name = "name", columnDefinition = "text")
  public String name;

  /** The queue worker ids it registered or named in heartbeats. */
  @JdbcTypeCode(SqlTypes.ARRAY)
  @Column(name = "worker_ids", columnDefinition = "_text")
  public String[] workerIds;

  /** SHA-256 of its bearer token; the token itself is never stored. */
  @Column(name = "token_hash", columnDefinition = "bytea")
  public byte[] tokenHash;

  /** {@code live}, {@code dead} or {@code left} as stored: a live one may have run out. */
  @Column(name = "state", columnDefinition = "text")
  public String state;

  @Column(name = "registered_at", columnDefinition = "timestamptz")
  public OffsetDateTime registeredAt;

  @Column(name = "last_heartbeat_at", columnDefinition = "timestamptz")
  public OffsetDateTime lastHeartbeatAt;

  @Column(name = "lease_expires_at", columnDefinition = "timestamptz")
  public OffsetDateTime leaseExpiresAt;

  @Column(name = "ended_at", columnDefinition = "timestamptz")
  public OffsetDateTime endedAt;

  @Column(name = "end_reason", columnDefinition = "text")
  public String endReason;

  /** True while live by the database's clock now. */
  @Formula("rollcall.is_live(state, lease_expires_at)")
  public boolean live;

  /** The state as the database's clock has it now: a live one whose lease ran out is dead. */
  @Formula("CASE WHEN rollcall.is_expired(state, lease_expires_at) THEN 'dead' ELSE state END")
  public String shownState;

  /** How many runs its last in-flight report holds. */
  @Formula("(SELECT count(*) FROM rollcall.ownership o WHERE o.instance_id = id)")
  public long inFlight;

  /** Its registered worker ids, then those learned from the queue. */
  @JdbcTypeCode(SqlTypes.ARRAY)
  @Formula(
      "worker_ids || ARRAY(SELECT w.worker_id FROM rollcall.queue_workers w"
          + " WHERE w.instance_id = id AND w.worker_id <> ALL(worker_ids)"
          + " ORDER BY w.learned_at, w.worker_id)")
  public String[] knownWorkerIds;
}
