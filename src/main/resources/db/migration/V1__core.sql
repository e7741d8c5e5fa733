-- Rollcall's own schema. Every lease and deadline in it is compared with the database's now().

-- One app process. Live while state = 'live' and lease_expires_at > now(); a dead or left
-- instance is fenced for good: it must register again as a new instance.
CREATE TABLE rollcall.instances (
    id                uuid PRIMARY KEY,
    namespace         text        NOT NULL,
    deployment_id     text        NOT NULL,
    name              text        NOT NULL,
    worker_ids        text[]      NOT NULL DEFAULT '{}',
    -- SHA-256 of the bearer token; the token itself is never stored.
    token_hash        bytea       NOT NULL UNIQUE,
    state             text        NOT NULL DEFAULT 'live' CHECK (state IN ('live', 'dead', 'left')),
    registered_at     timestamptz NOT NULL DEFAULT now(),
    last_heartbeat_at timestamptz NOT NULL DEFAULT now(),
    lease_expires_at  timestamptz NOT NULL,
    ended_at          timestamptz,
    end_reason        text
);
CREATE INDEX instances_live_by_lease ON rollcall.instances (lease_expires_at) WHERE state = 'live';
CREATE INDEX instances_by_namespace ON rollcall.instances (namespace, state);

-- One recovery pass: a snapshot bound, a scan cursor and a state.
CREATE TABLE rollcall.epochs (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    namespace           text        NOT NULL,
    kind                text        NOT NULL CHECK (kind IN ('boot', 'takeover', 'sweep', 'manual')),
    -- boot: the deploy it recovers.
    deployment_id       text,
    -- takeover: the dead instance whose runs it recovers.
    subject_instance_id uuid REFERENCES rollcall.instances (id),
    state               text        NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'closed')),
    close_reason        text,
    -- The snapshot: runs with a larger id, or created later, are not part of the epoch.
    snapshot_max_id     text,
    snapshot_at         timestamptz NOT NULL DEFAULT now(),
    scan_cursor         text,
    scan_done           boolean     NOT NULL DEFAULT false,
    runs_scanned        bigint      NOT NULL DEFAULT 0,
    created_by          uuid,
    created_at          timestamptz NOT NULL DEFAULT now(),
    closed_at           timestamptz,
    CHECK (kind <> 'boot' OR deployment_id IS NOT NULL),
    CHECK (kind <> 'takeover' OR subject_instance_id IS NOT NULL)
);
-- Single flight: exactly one boot epoch per deploy and one takeover per dead instance, whatever
-- the number of claimers and service replicas racing to create them.
CREATE UNIQUE INDEX epochs_one_boot_per_deploy ON rollcall.epochs (namespace, deployment_id)
    WHERE kind = 'boot';
CREATE UNIQUE INDEX epochs_one_takeover_per_instance ON rollcall.epochs (subject_instance_id)
    WHERE kind = 'takeover';
CREATE INDEX epochs_open_by_namespace ON rollcall.epochs (namespace, kind) WHERE state = 'open';

-- A page of runs cut from an epoch. Leased to one claimer at a time; the fence goes up on every
-- lease, and only the current fence may complete it.
CREATE TABLE rollcall.batches (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    epoch_id         bigint      NOT NULL REFERENCES rollcall.epochs (id),
    state            text        NOT NULL CHECK (state IN ('ready', 'leased', 'completed', 'abandoned')),
    fence            integer     NOT NULL DEFAULT 0,
    -- How many times these runs were handed out in this epoch (carried into retry batches).
    attempts         integer     NOT NULL DEFAULT 0,
    claimer_id       uuid REFERENCES rollcall.instances (id),
    leased_at        timestamptz,
    lease_expires_at timestamptz,
    run_count        integer     NOT NULL,
    -- The batch whose failed runs this one hands out again.
    retry_of         bigint REFERENCES rollcall.batches (id),
    created_at       timestamptz NOT NULL DEFAULT now(),
    completed_at     timestamptz,
    CHECK (state <> 'leased' OR (claimer_id IS NOT NULL AND lease_expires_at IS NOT NULL))
);
CREATE INDEX batches_claimable ON rollcall.batches (epoch_id, id) WHERE state IN ('ready', 'leased');
CREATE INDEX batches_by_claimer ON rollcall.batches (claimer_id) WHERE state = 'leased';

-- The runs of a batch, fixed when it is cut. This table and the ledger take one row per run per
-- hand-out, inside the claim that holds the epoch lock: they carry no foreign keys, whose per-row
-- checks would cost more than the rest of the claim. Their batch and epoch ids come from the same
-- transaction that created the batch.
CREATE TABLE rollcall.batch_runs (
    batch_id      bigint NOT NULL,
    run_id        text   NOT NULL,
    workflow_name text,
    reason        text   NOT NULL,
    PRIMARY KEY (batch_id, run_id)
);

-- Every run handed out or skipped: by which epoch, batch and fence, to whom, why, and how it
-- ended. Answers "why was run R re-driven, by whom, how many times".
CREATE TABLE rollcall.ledger (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    namespace   text        NOT NULL,
    run_id      text        NOT NULL,
    epoch_id    bigint      NOT NULL,
    batch_id    bigint,
    fence       integer,
    instance_id uuid,
    reason      text        NOT NULL,
    -- leased, enqueued, failed, lease-expired, abandoned (and skipped / deferred for skips)
    outcome     text        NOT NULL,
    detail      text,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    resolved_at timestamptz
);
CREATE INDEX ledger_by_run ON rollcall.ledger (namespace, run_id, id);
CREATE INDEX ledger_by_batch ON rollcall.ledger (batch_id, fence);
