-- The step a queue job's message executes: the `stepId` of the message body (base64 JSON in the
-- payload's `data`), NULL for a workflow message or a payload that is not the engine's. A takeover
-- asks which steps of a run a live delivery holds right now before it mends a torn step that a
-- step message started (a start that names no inline owner): a delivery holds its job locked from
-- before its step_started until after the step's last write, so a step no locked job names has no
-- live writer. PARALLEL UNSAFE like engine_job_run_id (V15): the EXCEPTION block is a
-- subtransaction. Expand only: nothing of the previous release reads or drops it.
CREATE FUNCTION rollcall.engine_job_step_id(payload json) RETURNS text
    LANGUAGE plpgsql IMMUTABLE PARALLEL UNSAFE AS $$
DECLARE
    body json;
BEGIN
    body := convert_from(decode(payload ->> 'data', 'base64'), 'UTF8')::json;
    RETURN body ->> 'stepId';
EXCEPTION WHEN others THEN
    RETURN NULL;
END
$$;
