-- Liveness bound to an instance's own database session. A client holds a session-level advisory
-- lock in a dedicated connection for as long as it is registered; PostgreSQL releases it the moment
-- that session ends (kill -9, OOM kill, crash: the kernel closes the socket), so a live instance
-- whose lock nobody holds is dead, long before its lease runs out. The lease stays the fallback for
-- what a session cannot see (a hung process, a partition) and for instances that cannot hold a lock.

-- The lock's second int4 key (the first is Rollcall's fixed class id): the first 32 bits of the
-- instance id, so every registration (every incarnation of a process) has its own key. The two-int4
-- form is a key space of its own in pg_locks (objsubid = 2), apart from the single-bigint form.
CREATE FUNCTION rollcall.session_lock_objid(instance_id uuid) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT ('x' || substr(replace(instance_id::text, '-', ''), 1, 8))::bit(32)::integer $$;

ALTER TABLE rollcall.instances
    -- What the instance last reported about its lock, as the service checked it:
    --   none         nothing reported (an older client, or the option is off): lease only
    --   held         reported held and seen held in pg_locks by the reported backend: fast path armed
    --   unseen       reported held but the service does not see it (another database or cluster,
    --                a pooler): lease only
    --   unavailable  the client cannot hold it (a transaction-pooling proxy, a key collision)
    --   lost         the client's session ended; it is reconnecting: lease only until held again
    ADD COLUMN session_lock text NOT NULL DEFAULT 'none'
        CHECK (session_lock IN ('none', 'held', 'unseen', 'unavailable', 'lost')),
    ADD COLUMN session_pid integer,
    -- When the lock was reported held by this backend: registration or the last reconnect. The fast
    -- path waits a grace after it.
    ADD COLUMN session_since timestamptz,
    -- When a service replica first saw the lock missing; death needs it still missing a while later.
    ADD COLUMN session_missing_since timestamptz;

-- The session check reads only instances whose fast path is armed.
CREATE INDEX instances_live_session_held ON rollcall.instances (id)
    WHERE state = 'live' AND session_lock = 'held';
