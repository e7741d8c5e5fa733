package dev.rollcall.model;

import io.quarkus.hibernate.reactive.panache.PanacheRepositoryBase;
import jakarta.enterprise.context.ApplicationScoped;
import java.util.UUID;

/** Queries of instances ({@link Instance}). */
@ApplicationScoped
public class InstanceRepository implements PanacheRepositoryBase<Instance, UUID> {}
