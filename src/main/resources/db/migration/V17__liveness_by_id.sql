-- The rule of a live instance, with the clock as an argument. rollcall.is_live(state, lease) stays
-- the one definition every statement calls: it is this function with the transaction's now(), and
-- is inlined exactly as before (state = 'live' AND lease_expires_at > now()), so the partial
-- indexes on state = 'live' keep matching.
--
-- Why a clock argument: a live instance's lease always lies ahead of the statistics of the last
-- ANALYZE (heartbeats move it forward every few seconds), and a partial index cannot be probed for
-- the column's actual range. Compared with now(), the planner therefore estimates that about one
-- instance is live, and a statement that finds its rows by id (a heartbeat flush, a leave) reads
-- every live lease through instances_live_by_lease and filters the ids out of them: its cost grew
-- with the fleet. Statements that find instance rows by id pass the same clock as an InitPlan,
-- (SELECT now()), which the planner cannot estimate from, and take the primary key
-- (dev.rollcall.registry.Liveness).
CREATE FUNCTION rollcall.is_live_at(state text, lease_expires_at timestamptz, at timestamptz)
    RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT state = 'live' AND lease_expires_at > at $$;

CREATE OR REPLACE FUNCTION rollcall.is_live(state text, lease_expires_at timestamptz)
    RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT rollcall.is_live_at(state, lease_expires_at, now()) $$;
