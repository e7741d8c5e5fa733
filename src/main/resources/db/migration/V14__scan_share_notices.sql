-- A pass's scan is worked by at most rollcall.claim.max-scanners instances at once; the other
-- instances' claims wait. When an instance's last range or batch of a pass still being scanned
-- ends (completed, given up, or a range that held nothing to hand out), a share of the scan is
-- free: a "work" notice wakes one waiting claim of the deploy on each service replica, which then
-- decides from the database alone, as any claim does. Ends of a lease that leave its instance
-- another lease in the pass (the batch it took while enqueuing this one) notify no one.
CREATE FUNCTION rollcall.notify_scan_share() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM rollcall.batches o
                   WHERE o.claimer_id = OLD.claimer_id AND o.epoch_id = OLD.epoch_id
                     AND o.id <> OLD.id AND o.state IN ('scanning', 'leased')) THEN
        PERFORM pg_notify('rollcall_recovery', json_build_object(
            'event', 'work', 'namespace', e.namespace, 'epochId', e.id, 'kind', e.kind,
            'deploymentId', e.deployment_id)::text)
        FROM rollcall.epochs e
        WHERE e.id = OLD.epoch_id AND e.state = 'open' AND NOT e.scan_done;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER batches_lease_ended AFTER UPDATE OF state ON rollcall.batches
    FOR EACH ROW WHEN (OLD.state IN ('scanning', 'leased')
        AND NEW.state NOT IN ('scanning', 'leased') AND OLD.claimer_id IS NOT NULL)
    EXECUTE FUNCTION rollcall.notify_scan_share();
CREATE TRIGGER batches_range_dropped AFTER DELETE ON rollcall.batches
    FOR EACH ROW WHEN (OLD.state = 'scanning' AND OLD.claimer_id IS NOT NULL)
    EXECUTE FUNCTION rollcall.notify_scan_share();
