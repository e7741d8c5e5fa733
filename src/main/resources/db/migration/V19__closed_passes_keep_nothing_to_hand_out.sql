-- A closed pass hands nothing out again. Before this version two things could be left in one:
--  * a ready batch: a holder that completed its batch after the pass was closed (or at the same
--    instant) put the batch's failed runs into a new ready batch of the closed pass. Nothing ever
--    claimed it, and the admin API counted it as ready until retention deleted the pass;
--  * a scanning range: the close gave up only ready and leased batches, so a claimer classifying a
--    range when its pass closed leased it afterwards and handed its runs out, and a range whose
--    claimer died stayed scanning.
-- Both are given up here, as a close now gives them up. Neither was handed out under its fence,
-- so neither has ledger rows to write. The service no longer leaves them
-- (dev.rollcall.recovery.CompletionService#handsOutAgain, dev.rollcall.recovery.Epochs#close).
UPDATE rollcall.batches b
   SET state = 'abandoned', completed_at = now()
  FROM rollcall.epochs e
 WHERE e.id = b.epoch_id
   AND e.state = 'closed'
   AND b.state IN ('scanning', 'ready');
