-- A "work" notice of a batch now says which epoch kind and deploy it belongs to, as "closed"
-- notices do. A boot epoch's batches can be claimed only by instances of its own deploy, and a
-- "work" notice wakes one waiting claim: without the deploy, a lease released early in one
-- deploy's pass could wake a waiting claim of another deploy of the namespace, which found
-- nothing, and the claim that could take the batch slept on until its wait hint came round.
CREATE OR REPLACE FUNCTION rollcall.notify_batch_work() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('rollcall_recovery', json_build_object(
        'event', 'work', 'namespace', e.namespace, 'epochId', e.id, 'kind', e.kind,
        'deploymentId', e.deployment_id)::text)
    FROM rollcall.epochs e WHERE e.id = NEW.epoch_id;
    RETURN NULL;
END $$;
