-- A PL/pgSQL block with an EXCEPTION clause runs in a subtransaction, and PostgreSQL (15, for one;
-- 17 allows it) cannot start one during a parallel operation: a statement that calls such a
-- function under a parallel plan fails with "cannot start subtransactions during a parallel
-- operation" instead of answering.
-- These three functions were declared PARALLEL SAFE, so once a table they read grew large enough
-- for a parallel plan (the engine's queue, read whole by a takeover's queued-jobs check; its events
-- and queue, read by the stranded-owner check), the statement failed, and with it the evidence of
-- a page (fail open): a boot or sweep page's runs were handed out unclassified, and a takeover's as
-- owner-dead, even where a queued job (the dead owner's own message, redelivered) was about to
-- wake them, which replays a run twice at once. PostgreSQL's rule for a function that
-- changes the transaction state, even for a moment, is PARALLEL UNSAFE; the planner then keeps
-- statements that call them out of parallel plans (ParallelUnsafeFunctionsTest).
ALTER FUNCTION rollcall.engine_run_id(json) PARALLEL UNSAFE;
ALTER FUNCTION rollcall.engine_job_run_id(json) PARALLEL UNSAFE;
ALTER FUNCTION rollcall.cbor_text(bytea, text) PARALLEL UNSAFE;
