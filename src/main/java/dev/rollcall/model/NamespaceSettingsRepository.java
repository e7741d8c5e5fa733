package dev.rollcall.model;

import io.quarkus.hibernate.reactive.panache.PanacheRepositoryBase;
import io.smallrye.mutiny.Uni;
import jakarta.enterprise.context.ApplicationScoped;

/** Namespaces' settings ({@link NamespaceSettings}). */
@ApplicationScoped
public class NamespaceSettingsRepository
    implements PanacheRepositoryBase<NamespaceSettings, String> {

  /**
   * Sets a namespace's boot-recovery switch, creating its row on first use. One statement (an
   * upsert, stamped with the database's clock), so that operators switching at once on any service
   * replica never collide on the first row; the last one wins. Needs a transaction.
   */
  public Uni<Void> setBootRecovery(String namespace, boolean on) {
    return getSession()
        .chain(
            session ->
                session
                    .createMutationQuery(
                        "insert into NamespaceSettings (namespace, bootRecovery, updatedAt)"
                            + " values (:namespace, :on, offset datetime)"
                            + " on conflict (namespace) do update"
                            + " set bootRecovery = excluded.bootRecovery,"
                            + " updatedAt = excluded.updatedAt")
                    .setParameter("namespace", namespace)
                    .setParameter("on", on)
                    .executeUpdate())
        .replaceWithVoid();
  }
}
