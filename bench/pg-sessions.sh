#!/usr/bin/env bash
# Prints, every INTERVAL seconds (default 1), the instances table's live leases and dead row
# versions, its indexes' scans and entries read since the database started (index=scans/entries),
# and every busy session of the PostgreSQL a running benchmark started (embedded, found by its
# command line; or PGPORT): state, wait event, seconds in the statement, the sessions blocking it,
# and the statement's start. Run it beside a benchmark: bench/pg-sessions.sh 1 > sessions.log
# Needs psql (PostgreSQL's client) on the PATH; nothing in the build or the tests uses it.
set -u
interval="${1:-1}"
while true; do
  port="${PGPORT:-$(ps -eo args | grep -oE 'postgres .*-p [0-9]+' | grep -oE '\-p [0-9]+' | head -1 | awk '{print $2}')}"
  if [ -n "$port" ]; then
    echo "--- $(date +%T.%N | cut -c1-10) $(psql -h localhost -p "$port" -U postgres -X -At -c "SELECT count(*) FILTER (WHERE state = 'live' AND lease_expires_at > now()) || ' live leases, ' || count(*) || ' instances; ' || (SELECT n_dead_tup || ' dead versions, analyzed ' || coalesce(last_autoanalyze::time::text, '-') FROM pg_stat_user_tables WHERE relname = 'instances') FROM rollcall.instances" 2>/dev/null)"
    echo "    $(psql -h localhost -p "$port" -U postgres -X -At -c "SELECT string_agg(indexrelname || '=' || idx_scan || '/' || idx_tup_read, ' ' ORDER BY indexrelname) FROM pg_stat_user_indexes WHERE relname = 'instances'" 2>/dev/null)"
    psql -h localhost -p "$port" -U postgres -X -At -F'|' -c "SELECT pid, state, wait_event_type, wait_event, round(extract(epoch FROM now() - query_start)::numeric, 2), pg_blocking_pids(pid), left(regexp_replace(query, '\s+', ' ', 'g'), 60) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() AND state <> 'idle' ORDER BY query_start" 2>/dev/null
  fi
  sleep "$interval"
done
