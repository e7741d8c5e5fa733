-- rollcall.replace_in_flight (V20) runs one statement at every heartbeat flush. PL/pgSQL keeps
-- that statement prepared for the session, but by default PostgreSQL plans it again at every call
-- with the call's arrays (a custom plan), and keeps doing so whenever the generic plan's estimate
-- looks costlier: planning took 0.4-1.0 ms a call, more than running it for a flush of a few
-- dozen steady sets (0.25-0.35 ms). A flush calls it once, so under load that was about half of
-- the statement's time in PostgreSQL. The generic plan is the one the statement is written for:
-- each instance's rows read through its key (OFFSET 0 keeps each lateral subquery a
-- parameterised index scan, whatever the arrays hold), and OwnershipPlanTest checks its shape.
ALTER FUNCTION rollcall.replace_in_flight(uuid[], text[], uuid[], text[], text[])
    SET plan_cache_mode = force_generic_plan;
