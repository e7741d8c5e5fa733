/**
 * The control plane's entities and read models, mapped with Hibernate Reactive on the schema Flyway
 * owns (Hibernate validates the mapping at boot and never changes the schema). Columns name their
 * PostgreSQL type as the catalog spells it ({@code text}, {@code int8}, {@code timestamptz}), which
 * is what the validation compares. What recovery decides (leases, fences, page cuts, re-leases,
 * classification, queue locks) and the hot path (authentication, heartbeat, claim, complete) are
 * explicit SQL on the reactive client instead: see docs/architecture.md.
 */
package dev.rollcall.model;
