-- Owner-aware recovery.

-- Who is executing which run right now: every live instance's last reported in-flight set.
-- "What does instance I own" walks the primary key; "who owns run R" the second index.
CREATE TABLE rollcall.ownership (
    instance_id uuid        NOT NULL REFERENCES rollcall.instances (id),
    run_id      text        NOT NULL,
    namespace   text        NOT NULL,
    reported_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (instance_id, run_id)
);
CREATE INDEX ownership_by_run ON rollcall.ownership (namespace, run_id);

-- Runs an epoch did not hand out yet because a live instance owned them or they were recently
-- active. They are re-checked before the epoch closes: handed out if that proof is gone.
CREATE TABLE rollcall.deferred (
    epoch_id      bigint      NOT NULL,
    run_id        text        NOT NULL,
    workflow_name text,
    reason        text        NOT NULL,
    deferred_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (epoch_id, run_id)
);

-- Runs of a takeover carry the dead instance they were taken from.
ALTER TABLE rollcall.batch_runs ADD COLUMN dead_instance_id uuid;

-- Takeover: when the dead instance's lease ran out (null for a graceful leave), so that detection
-- latency (created_at - subject_lease_expired_at) can be derived for every takeover.
ALTER TABLE rollcall.epochs ADD COLUMN subject_lease_expired_at timestamptz;
