package dev.rollcall.model;

import io.quarkus.hibernate.reactive.panache.PanacheRepositoryBase;
import jakarta.enterprise.context.ApplicationScoped;

/** Queries of epochs and their progress ({@link EpochProgress}). */
@ApplicationScoped
public class EpochProgressRepository implements PanacheRepositoryBase<EpochProgress, Long> {}
