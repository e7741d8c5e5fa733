-- Short critical sections and push-based claims.

-- A scanning batch is a key range of an epoch's scan that a claimer cut under the epoch lock and
-- now classifies outside it: the range's run ids are fixed when it is cut (scan_run_ids), and the
-- range is leased like any batch, so a claimer that dies before classifying it loses the lease and
-- the next claimer classifies the same runs. Classifying turns it into a leased batch of the runs
-- it hands out (or removes it when it hands out none).
ALTER TABLE rollcall.batches ADD COLUMN scan_run_ids text[];
ALTER TABLE rollcall.batches DROP CONSTRAINT batches_state_check;
ALTER TABLE rollcall.batches ADD CONSTRAINT batches_state_check
    CHECK (state IN ('scanning', 'ready', 'leased', 'completed', 'abandoned'));
ALTER TABLE rollcall.batches ADD CONSTRAINT batches_scanning_has_range
    CHECK (state <> 'scanning' OR (scan_run_ids IS NOT NULL AND claimer_id IS NOT NULL
        AND lease_expires_at IS NOT NULL));

DROP INDEX rollcall.batches_claimable;
CREATE INDEX batches_claimable ON rollcall.batches (epoch_id, id)
    WHERE state IN ('scanning', 'ready', 'leased');
DROP INDEX rollcall.batches_by_claimer;
CREATE INDEX batches_by_claimer ON rollcall.batches (claimer_id) WHERE state IN ('scanning', 'leased');

-- Push: waiting claims (on any service replica) are woken by notifications on the channel
-- rollcall_recovery, sent when the transaction that made the change commits. "work": a batch may
-- be claimed now (a ready batch was cut, a lease was released early, a shared pass opened);
-- "closed": an epoch closed. Triggers send them, so no code path that changes batches or epochs
-- can forget to.
CREATE FUNCTION rollcall.notify_batch_work() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('rollcall_recovery', json_build_object(
        'event', 'work', 'namespace', e.namespace, 'epochId', e.id)::text)
    FROM rollcall.epochs e WHERE e.id = NEW.epoch_id;
    RETURN NULL;
END $$;

CREATE TRIGGER batches_ready AFTER INSERT ON rollcall.batches
    FOR EACH ROW WHEN (NEW.state = 'ready') EXECUTE FUNCTION rollcall.notify_batch_work();
-- A lease cut short (its holder left or died) makes the batch claimable at once.
CREATE TRIGGER batches_released AFTER UPDATE OF lease_expires_at ON rollcall.batches
    FOR EACH ROW WHEN (NEW.state IN ('scanning', 'leased')
        AND NEW.lease_expires_at < OLD.lease_expires_at)
    EXECUTE FUNCTION rollcall.notify_batch_work();

CREATE FUNCTION rollcall.notify_epoch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('rollcall_recovery', json_build_object(
        'event', CASE WHEN TG_OP = 'INSERT' THEN 'work' ELSE 'closed' END,
        'namespace', NEW.namespace, 'epochId', NEW.id, 'kind', NEW.kind,
        'deploymentId', NEW.deployment_id)::text);
    RETURN NULL;
END $$;

-- A boot epoch is created by a claim, which serves it at once: no one waits for it to open.
CREATE TRIGGER epochs_opened AFTER INSERT ON rollcall.epochs
    FOR EACH ROW WHEN (NEW.kind <> 'boot') EXECUTE FUNCTION rollcall.notify_epoch();
CREATE TRIGGER epochs_closed AFTER UPDATE OF state ON rollcall.epochs
    FOR EACH ROW WHEN (OLD.state = 'open' AND NEW.state = 'closed')
    EXECUTE FUNCTION rollcall.notify_epoch();
