-- One service replica at a time reads the queue for orphaned locks (Reaper): the look reads every
-- locked job of each namespace with a queue, and every service replica used to run it on its own
-- schedule. A replica looks only after winning the guarded update that moves this row's lease
-- forward, decided by the database's now(), like retention's row.
INSERT INTO rollcall.housekeeping (job) VALUES ('orphaned-locks');
