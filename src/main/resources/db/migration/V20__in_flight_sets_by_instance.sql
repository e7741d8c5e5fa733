-- Replaces the in-flight sets of several instances at once (a heartbeat flush's, or one
-- instance's at registration and leave): instances $1 of namespaces $2 now execute exactly the
-- executions ($3 instance, $4 run, $5 queue message id or null). Rows no longer reported are
-- deleted, rows not there yet inserted, and rows reported again are left untouched (a message
-- keeps the time of its first report), so a steady set writes nothing. Of two sets of one instance
-- the caller passes the last only. Called by dev.rollcall.registry.Ownership#replace.
--
-- How it reads the tables is the point, because every heartbeat of every client carries a set:
--  * Each instance's rows are read through its key, one index probe per instance (had_runs,
--    had_messages): OFFSET 0 keeps each lateral subquery a parameterised scan. Written as a join,
--    a flush of a few dozen beats was planned as a sequential scan of every instance's rows, and
--    under load flushes grow.
--  * Plain index scans, not bitmap scans (the function's SET). Sets that change leave dead rows
--    faster than autovacuum removes them; an index scan marks the index entries of dead rows so
--    the next probe skips them, a bitmap scan never does, so its probes grew slower with every
--    change until the next vacuum.
--  * Rows are deleted by the row ids read there (a TID scan). They stay valid: every writer of an
--    instance's rows holds its instance row locked (the flush's renewal, a registration, a leave,
--    a takeover), and the statement reads and deletes in one snapshot.
CREATE FUNCTION rollcall.replace_in_flight(uuid[], text[], uuid[], text[], text[]) RETURNS void
    LANGUAGE plpgsql SET enable_bitmapscan = off AS $$
BEGIN
WITH replaced AS (SELECT b.instance_id, b.namespace
                    FROM unnest($1, $2) AS b(instance_id, namespace)),
     incoming AS (SELECT u.instance_id, u.run_id, u.message_id
                    FROM unnest($3, $4, $5) AS u(instance_id, run_id, message_id)),
     runs AS (SELECT DISTINCT instance_id, run_id FROM incoming),
     messages AS (SELECT DISTINCT ON (instance_id, message_id) instance_id, message_id, run_id
                    FROM incoming WHERE message_id IS NOT NULL
                   ORDER BY instance_id, message_id, run_id),
     had_runs AS (SELECT b.instance_id, o.ctid AS row_id, o.run_id FROM replaced b
                    CROSS JOIN LATERAL (SELECT ctid, run_id FROM rollcall.ownership
                                         WHERE instance_id = b.instance_id OFFSET 0) o),
     had_messages AS (SELECT b.instance_id, m.ctid AS row_id, m.message_id FROM replaced b
                        CROSS JOIN LATERAL (SELECT ctid, message_id FROM rollcall.ownership_messages
                                             WHERE instance_id = b.instance_id OFFSET 0) m),
     dropped AS (DELETE FROM rollcall.ownership WHERE ctid = ANY (ARRAY(
                   SELECT h.row_id FROM had_runs h WHERE NOT EXISTS (
                     SELECT 1 FROM runs r WHERE r.instance_id = h.instance_id AND r.run_id = h.run_id)))),
     dropped_messages AS (DELETE FROM rollcall.ownership_messages WHERE ctid = ANY (ARRAY(
                   SELECT h.row_id FROM had_messages h WHERE NOT EXISTS (
                     SELECT 1 FROM messages i
                      WHERE i.instance_id = h.instance_id AND i.message_id = h.message_id)))),
     added_messages AS (INSERT INTO rollcall.ownership_messages (instance_id, message_id, run_id, namespace)
                        SELECT i.instance_id, i.message_id, i.run_id, b.namespace
                          FROM messages i JOIN replaced b ON b.instance_id = i.instance_id
                         WHERE NOT EXISTS (SELECT 1 FROM had_messages h
                                            WHERE h.instance_id = i.instance_id AND h.message_id = i.message_id)
                        ON CONFLICT DO NOTHING)
INSERT INTO rollcall.ownership (instance_id, run_id, namespace)
SELECT r.instance_id, r.run_id, b.namespace
  FROM runs r JOIN replaced b ON b.instance_id = r.instance_id
 WHERE NOT EXISTS (SELECT 1 FROM had_runs h WHERE h.instance_id = r.instance_id AND h.run_id = r.run_id)
ON CONFLICT DO NOTHING;
END
$$;
