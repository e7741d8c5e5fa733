package dev.rollcall.model;

import jakarta.persistence.Column;
import jakarta.persistence.Entity;
import jakarta.persistence.Id;
import jakarta.persistence.Table;
import java.time.OffsetDateTime;

/**
 * The switches an operator sets for a namespace at run time ({@code rollcall.namespace_settings});
 * a namespace without a row has every default. Claims read {@code boot_recovery} inside their own
 * transaction with explicit SQL; the admin API reads and writes it here.
 */
@Entity
@Table(name = "namespace_settings")
public class NamespaceSettings {

  @Id
  @Column(name = "namespace", columnDefinition = "text")
  public String namespace;

  @Column(name = "boot_recovery", columnDefinition = "bool")
  public boolean bootRecovery;

  @Column(name = "updated_at", columnDefinition = "timestamptz")
  public OffsetDateTime updatedAt;
}
