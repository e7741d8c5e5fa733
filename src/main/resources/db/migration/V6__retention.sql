-- Bounded storage for installations that run for months.

-- How many runs each pass deferred and skipped, by reason. A pass writes a ledger row only for a
-- run's first deferral or skip of a kind since the run was last handed out (so its "why" stays
-- answerable); the counts of every pass live here, one row per outcome and reason.
CREATE TABLE rollcall.epoch_counts (
    epoch_id bigint NOT NULL,
    outcome  text   NOT NULL,
    reason   text   NOT NULL,
    runs     bigint NOT NULL,
    PRIMARY KEY (epoch_id, outcome, reason)
);

-- Single flight for housekeeping jobs across service replicas: a pass runs only after winning the
-- guarded update that moves its lease forward (decided by the database's now()).
CREATE TABLE rollcall.housekeeping (
    job         text PRIMARY KEY,
    lease_until timestamptz NOT NULL DEFAULT '-infinity',
    last_pass   timestamptz
);
INSERT INTO rollcall.housekeeping (job) VALUES ('retention');

-- Retention walks closed epochs by age, their batches, and ended instances by age; an instance is
-- deleted only once no epoch or batch refers to it.
CREATE INDEX epochs_closed_by_age ON rollcall.epochs (closed_at) WHERE state = 'closed';
CREATE INDEX batches_by_epoch ON rollcall.batches (epoch_id, id);
CREATE INDEX batches_by_any_claimer ON rollcall.batches (claimer_id) WHERE claimer_id IS NOT NULL;
CREATE INDEX instances_ended_by_age ON rollcall.instances (ended_at) WHERE state <> 'live';
