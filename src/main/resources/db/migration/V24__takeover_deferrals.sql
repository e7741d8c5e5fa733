-- A takeover defers a run a live instance still reports when the dead instance owed it a re-drive
-- (its step was mended, or a dead step message owned its interrupted step inline): the run is
-- handed out only once no live instance reports it, so that recovery never replays a run beside a
-- live delivery. The owner message is the one to re-drive it with, null for a plain wake-up.
-- Expand only: a replica of the previous release inserts deferrals without it.
ALTER TABLE rollcall.deferred ADD COLUMN owner_message_id text;
