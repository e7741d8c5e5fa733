-- The one definition of a live instance: state 'live' and its lease not yet run out; and of its
-- complement the reaper acts on, a live-state instance whose lease has run out (not reaped yet).
-- Every statement that asks either question calls these functions instead of spelling the rule
-- out again.
--
-- One clock: now() inside a STABLE SQL function is the calling transaction's now(), the same
-- value the statement itself sees, so the statement that acts on a lease still decides it by its
-- own clock. A single-expression SQL function that is not STRICT and no more volatile than its
-- body is inlined by the planner: rollcall.is_live(i.state, i.lease_expires_at) plans exactly as
-- i.state = 'live' AND i.lease_expires_at > now(), so the partial indexes on state = 'live'
-- (instances_live_by_lease, instances_live_session_held) keep matching.
CREATE FUNCTION rollcall.is_live(state text, lease_expires_at timestamptz) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT state = 'live' AND lease_expires_at > now() $$;

CREATE FUNCTION rollcall.is_expired(state text, lease_expires_at timestamptz) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT state = 'live' AND lease_expires_at <= now() $$;

-- A batch a claim may take now: ready, or scanning/leased with its lease run out (its claimer died
-- or stalled). Inlined like the functions above, so the partial index batches_claimable (state IN
-- ('scanning', 'ready', 'leased')) still serves it.
CREATE FUNCTION rollcall.is_claimable(state text, lease_expires_at timestamptz) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT state = 'ready' OR (state IN ('scanning', 'leased') AND lease_expires_at <= now()) $$;

-- Who serves an epoch: every instance of its namespace serves a shared epoch (takeover, sweep,
-- manual); a boot epoch is served only by instances of its own deploy. With a NULL deployment it
-- is true exactly for the shared epochs.
CREATE FUNCTION rollcall.serves(epoch_kind text, epoch_deployment_id text, deployment_id text)
    RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT epoch_kind <> 'boot' OR epoch_deployment_id = deployment_id $$;
