-- rollcall.replace_in_flight (V20) runs one statement at every heartbeat flush. PL/pgSQL keeps
-- that statement prepared for the session, but by default PostgreSQL may plan it again at every
-- call with the call's arrays (a custom plan) whenever the generic plan's estimate looks costlier.
-- In psql, with the same arrays call after call, planning took 0.4-1.0 ms a call, more than running
-- it for a few steady sets (0.25-0.35 ms). (In the service at 2 000 heartbeats a second no change
-- in PostgreSQL's CPU was visible: BENCHMARKS.md §8.) The generic plan is the one the statement is
-- written for: each instance's rows read through its key (OFFSET 0 keeps each lateral subquery a
-- parameterised index scan, whatever the arrays hold), and OwnershipPlanTest checks its shape.
ALTER FUNCTION rollcall.replace_in_flight(uuid[], text[], uuid[], text[], text[])
    SET plan_cache_mode = force_generic_plan;
