-- Queue locks learned from the queue itself.

-- The queue message ids of each live instance's executions, as its in-flight reports carry them
-- (replace semantics, with rollcall.ownership). One run may appear with several messages (a
-- workflow replay and a step). "Does a live instance report message M" walks the second index.
CREATE TABLE rollcall.ownership_messages (
    instance_id uuid        NOT NULL REFERENCES rollcall.instances (id),
    message_id  text        NOT NULL,
    run_id      text        NOT NULL,
    namespace   text        NOT NULL,
    reported_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (instance_id, message_id)
);
CREATE INDEX ownership_messages_by_message ON rollcall.ownership_messages (namespace, message_id);

-- Queue workers learned from the queue: the worker that holds the lock on the job of a message an
-- instance reported executing is that instance's. A worker belongs to one instance (the first
-- that showed it); rows outlive the instance, so that a death finds them.
CREATE TABLE rollcall.queue_workers (
    namespace   text        NOT NULL,
    worker_id   text        NOT NULL,
    instance_id uuid        NOT NULL REFERENCES rollcall.instances (id),
    learned_at  timestamptz NOT NULL DEFAULT now(),
    -- The message whose job showed the worker: the proof of the mapping.
    message_id  text        NOT NULL,
    PRIMARY KEY (namespace, worker_id)
);
CREATE INDEX queue_workers_by_instance ON rollcall.queue_workers (instance_id);

-- Orphaned queue locks are released outside any epoch: their ledger rows have none.
ALTER TABLE rollcall.ledger ALTER COLUMN epoch_id DROP NOT NULL;

-- A run re-driven with a given queue message id (an interrupted step's owner message).
ALTER TABLE rollcall.batch_runs ADD COLUMN message_id text;

-- The text value stored under a key of a CBOR map, as cbor-x encodes a JS object (the engine's
-- event data, payload_cbor): the key as a text string, then a text string of up to 255 bytes.
-- Null when the key is absent or its value is not such a string; never an error (fail open).
CREATE FUNCTION rollcall.cbor_text(data bytea, key text) RETURNS text
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    k   bytea := convert_to(key, 'UTF8');
    pos int;
    head int;
    len int;
BEGIN
    IF data IS NULL OR length(k) > 23 THEN
        RETURN NULL;
    END IF;
    pos := position(set_byte('\x00'::bytea, 0, 96 + length(k)) || k IN data);
    IF pos = 0 THEN
        RETURN NULL;
    END IF;
    pos := pos + 1 + length(k); -- 1-based position of the value's head byte
    head := get_byte(data, pos - 1);
    IF head BETWEEN 96 AND 119 THEN
        len := head - 96;
    ELSIF head = 120 THEN
        len := get_byte(data, pos);
        pos := pos + 1;
    ELSE
        RETURN NULL;
    END IF;
    RETURN convert_from(substring(data FROM pos + 1 FOR len), 'UTF8');
EXCEPTION WHEN others THEN
    RETURN NULL;
END
$$;

-- The run id of an engine queue job of any task: "runId" (workflow messages) or "workflowRunId"
-- (step messages) inside the base64 "data" of the payload. Null when not the engine's.
CREATE FUNCTION rollcall.engine_job_run_id(payload json) RETURNS text
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    body json;
BEGIN
    body := convert_from(decode(payload ->> 'data', 'base64'), 'UTF8')::json;
    RETURN coalesce(body ->> 'runId', body ->> 'workflowRunId');
EXCEPTION WHEN others THEN
    RETURN NULL;
END
$$;
