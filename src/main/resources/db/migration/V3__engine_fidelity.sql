-- Engine fidelity: positive proof of a live wake path, and sweeps.

-- The run id an engine queue job carries, or null when the payload is not the engine's: the id
-- exists only inside the base64 "data" of the payload, as the JSON body {"runId": ...}. Any
-- decoding error means "no proof" (fail open), never a failed classification.
CREATE FUNCTION rollcall.engine_run_id(payload json) RETURNS text
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN convert_from(decode(payload ->> 'data', 'base64'), 'UTF8')::json ->> 'runId';
EXCEPTION WHEN others THEN
    RETURN NULL;
END
$$;

-- The engine's queued workflow jobs by run, decoded once when an epoch opens (decoding per page
-- would read every job once per page). A page checks that the job still exists and can still
-- run; a job added later is simply not proof (the run is re-driven: fail open).
CREATE TABLE rollcall.epoch_wake_jobs (
    epoch_id bigint NOT NULL,
    run_id   text   NOT NULL,
    job_id   bigint NOT NULL,
    PRIMARY KEY (epoch_id, run_id, job_id)
);

-- Single flight for sweeps: at most one open sweep per namespace, whatever the replicas.
CREATE UNIQUE INDEX epochs_one_open_sweep ON rollcall.epochs (namespace)
    WHERE kind = 'sweep' AND state = 'open';
