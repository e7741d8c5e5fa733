-- A pass's counts of deferrals and skips are written by every classification of a page, and pages
-- are classified in parallel. With one row per epoch, outcome and reason, each classification's
-- upsert waited for the row lock of the one before it until that one committed: at 16 claimers,
-- classifications queued behind one another on it for up to half a second. Each write now adds to
-- one of 64 parts of the count, chosen by its transaction id, so transactions under way at the same
-- time write different rows (ids less than 64 apart never share a part). A count is the sum of its
-- parts, at most 64 rows per epoch, outcome and reason.
ALTER TABLE rollcall.epoch_counts ADD COLUMN part smallint NOT NULL DEFAULT 0;
ALTER TABLE rollcall.epoch_counts DROP CONSTRAINT epoch_counts_pkey;
ALTER TABLE rollcall.epoch_counts ADD PRIMARY KEY (epoch_id, outcome, reason, part);
