-- A complete sets the outcome and resolved_at of every ledger row of its batch. With outcome in an
-- index and the table's pages packed full, each such update wrote a new row version into all four
-- of the ledger's indexes: 10 ms for a batch of 400, the costliest of Rollcall's statements in a
-- deploy's recovery. With neither column indexed and more than half of each new page left free
-- (the new version is a little longer than the old), the update is HOT: the new version stays on
-- its page and no index changes. At 50 % a few rows of each page did not fit.
--
-- Queries that picked an epoch's rows by outcome now read all of the epoch's rows (the admin
-- API's progress view) or go by run (a deferral's resolution).
DROP INDEX rollcall.ledger_by_epoch;
CREATE INDEX ledger_by_epoch ON rollcall.ledger (epoch_id);
ALTER TABLE rollcall.ledger SET (fillfactor = 45);
