package dev.rollcall.model;

import io.quarkus.hibernate.reactive.panache.PanacheRepositoryBase;
import jakarta.enterprise.context.ApplicationScoped;

/** Queries of batches ({@link Batch}). */
@ApplicationScoped
public class BatchRepository implements PanacheRepositoryBase<Batch, Long> {}
