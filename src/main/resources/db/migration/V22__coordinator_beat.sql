-- When a service replica last showed it was running, by the database's clock: each replica with a
-- reaper writes it every reaper interval and when it starts. A gap longer than a heartbeat
-- interval means no replica could answer heartbeats: leases that ran out meanwhile are no evidence
-- of death, and the first replica back renews every live lease once (dev.rollcall.registry.Outages).
-- One row. An older replica that does not know the table simply never writes it.
CREATE TABLE rollcall.coordinator_beat (
    one     boolean     PRIMARY KEY DEFAULT true CHECK (one),
    beat_at timestamptz NOT NULL
);
INSERT INTO rollcall.coordinator_beat (beat_at) VALUES (now());
