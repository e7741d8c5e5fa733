-- The last queue job an epoch's decode of the queue (rollcall.epoch_wake_jobs, written when the
-- epoch opened) answers for: the largest job id created at least a minute before the decode, so
-- that a job whose transaction was still open then (a smaller id committed after a larger one) is
-- above it too. A run the engine has written to since the decode is classified with the jobs above
-- it as well, read from the queue by id: the engine queues a run's next message (a sleep's wake-up,
-- a step's) after the pass opened, and the decode alone would not see it. NULL: an epoch opened
-- before this column, or whose decode failed; its later jobs are not read. Expand only: the
-- previous release neither reads nor writes it.
ALTER TABLE rollcall.epochs ADD COLUMN wake_jobs_through bigint;
