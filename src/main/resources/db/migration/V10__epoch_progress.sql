-- The progress of every recovery pass, as the admin API shows it: one row per epoch, computed when
-- read (the duration of an open pass by the database's clock). Hibernate maps it read-only.
--
-- The view is flattened into the query that reads it: a page of epochs computes the counts only
-- for the rows on the page, and a query that selects none of them (counting open epochs) computes
-- none.
CREATE VIEW rollcall.epoch_progress AS
SELECT e.id,
       e.namespace,
       e.kind,
       e.state,
       e.close_reason,
       e.deployment_id,
       e.subject_instance_id,
       e.created_at,
       e.closed_at,
       (extract(epoch FROM coalesce(e.closed_at, now()) - e.created_at) * 1000)::bigint
           AS duration_ms,
       e.scan_done,
       e.runs_scanned,
       (SELECT count(DISTINCT l.run_id) FROM rollcall.ledger l
         WHERE l.epoch_id = e.id AND l.batch_id IS NOT NULL) AS handed_out,
       (SELECT count(DISTINCT l.run_id) FROM rollcall.ledger l
         WHERE l.epoch_id = e.id AND l.outcome = 'enqueued') AS enqueued,
       (SELECT count(*) FROM rollcall.ledger l
         WHERE l.epoch_id = e.id AND l.outcome = 'failed') AS failed,
       -- Deferrals and skips are counted per pass (the ledger keeps only a run's first).
       (SELECT coalesce(sum(c.runs), 0) FROM rollcall.epoch_counts c
         WHERE c.epoch_id = e.id AND c.outcome = 'deferred')::bigint AS deferred,
       (SELECT coalesce(sum(c.runs), 0) FROM rollcall.epoch_counts c
         WHERE c.epoch_id = e.id AND c.outcome = 'skipped')::bigint AS skipped,
       (SELECT count(*) FROM rollcall.deferred d WHERE d.epoch_id = e.id) AS pending_recheck,
       -- Leases that ran out: one per batch and fence.
       (SELECT count(DISTINCT (l.batch_id, l.fence)) FROM rollcall.ledger l
         WHERE l.epoch_id = e.id AND l.outcome = 'lease-expired') AS expired
  FROM rollcall.epochs e;
