package dev.rollcall.model;

import io.quarkus.hibernate.reactive.panache.PanacheRepositoryBase;
import jakarta.enterprise.context.ApplicationScoped;

/** Namespaces' settings ({@link NamespaceSettings}). */
@ApplicationScoped
public class NamespaceSettingsRepository
    implements PanacheRepositoryBase<NamespaceSettings, String> {}
