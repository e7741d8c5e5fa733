-- A hand-out's ledger row is written once, when its outcome is known (enqueued or failed at the
-- complete, lease-expired at a re-let, abandoned when given up), not at the claim and again at the
-- outcome. While a batch is leased its hand-outs are its batch_runs rows under the batch's fence,
-- claimer and lease time, written in the claim's transaction as before: nothing is lost, and every
-- reader that needs hand-outs still in flight reads them from one definition,
-- rollcall.hand_outs_in_flight: the admin API, a pass's progress, and a sweep's look-back.
--
-- Why: the claim's ledger insert was the costliest statement of the claim path, 500 rows into a
-- heap kept half empty (V11) and four indexes, and under load its backends queued for the
-- relation's extension lock. The claim now writes its batch_runs only; the complete writes each
-- row once with its outcome, so pages no longer need room for an in-place update.
--
-- Rows of batches leased before this migration are still 'leased' rows; the statements that write
-- an outcome update those rows when they exist and insert otherwise (dev.rollcall.recovery.Ledger).
ALTER TABLE rollcall.ledger SET (fillfactor = 100);

-- Hand-outs of batches leased now: one row per run of every leased batch, as a ledger row would
-- show it (outcome 'leased', resolved_at null). A batch that is 'ready' has not been handed out
-- under its fence yet. A batch leased before this migration has its rows in the ledger already.
CREATE VIEW rollcall.hand_outs_in_flight AS
SELECT e.namespace,
       r.run_id,
       b.epoch_id,
       b.id AS batch_id,
       b.fence,
       b.claimer_id AS instance_id,
       r.reason,
       're-drive with message ' || r.message_id AS detail,
       b.leased_at AS recorded_at
  FROM rollcall.batches b
  JOIN rollcall.batch_runs r ON r.batch_id = b.id
  JOIN rollcall.epochs e ON e.id = b.epoch_id
 WHERE b.state = 'leased'
   AND NOT EXISTS (SELECT 1 FROM rollcall.ledger l WHERE l.batch_id = b.id AND l.fence = b.fence);

-- Runs handed out by a pass: those whose hand-outs are written and those in flight.
CREATE OR REPLACE VIEW rollcall.epoch_progress AS
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
       (SELECT count(DISTINCT h.run_id)
          FROM (SELECT l.run_id FROM rollcall.ledger l
                 WHERE l.epoch_id = e.id AND l.batch_id IS NOT NULL
                UNION ALL
                SELECT f.run_id FROM rollcall.hand_outs_in_flight f
                 WHERE f.epoch_id = e.id) h) AS handed_out,
       (SELECT count(DISTINCT l.run_id) FROM rollcall.ledger l
         WHERE l.epoch_id = e.id AND l.outcome = 'enqueued') AS enqueued,
       (SELECT count(*) FROM rollcall.ledger l
         WHERE l.epoch_id = e.id AND l.outcome = 'failed') AS failed,
       (SELECT coalesce(sum(c.runs), 0) FROM rollcall.epoch_counts c
         WHERE c.epoch_id = e.id AND c.outcome = 'deferred')::bigint AS deferred,
       (SELECT coalesce(sum(c.runs), 0) FROM rollcall.epoch_counts c
         WHERE c.epoch_id = e.id AND c.outcome = 'skipped')::bigint AS skipped,
       (SELECT count(*) FROM rollcall.deferred d WHERE d.epoch_id = e.id) AS pending_recheck,
       (SELECT count(DISTINCT (l.batch_id, l.fence)) FROM rollcall.ledger l
         WHERE l.epoch_id = e.id AND l.outcome = 'lease-expired') AS expired
  FROM rollcall.epochs e;
