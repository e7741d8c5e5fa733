package dev.rollcall.source;

/**
 * One torn write of the engine repaired: the run, the write the engine had half done (for example
 * {@code step_completed}), the step or wait it concerned, and, in words, the evidence and what was
 * written. Each is recorded as a ledger row with outcome {@code torn-repaired}.
 */
public record Mend(String runId, String write, String subject, String detail) {}
