// Whether this process's queue workers may take new jobs while it is a member of Rollcall. A lease
// that lapsed unanswered means one of two things: this process is cut off from a service that runs
// (which declares it dead once the lease runs out there, takes its runs over and releases its queue
// locks: a job it took from then on could run on a peer as well), or the service itself is away
// (nobody can declare anyone dead, and the first service replica back renews the leases that
// lapsed meanwhile: work may go on). The database tells the two apart.

/**
 * The rule: no new job while the service said this instance is gone (`fenced`, until it is
 * registered again), nor while its lease has lapsed, unless the database shows the service away
 * (`serviceAway`); new jobs at any other time, including before the first registration and after
 * a fallback (no lease to lose). `state` is the client's life-cycle state.
 */
export function mayTakeJobs({ state, lapsed, serviceAway }) {
  if (state === 'fenced') return false;
  if (state === 'active' && lapsed) return serviceAway === true;
  return true;
}

/**
 * True when the database shows that no service replica has run for longer than a lease TTL and
 * that this instance's lease was still valid when one last ran: nobody can have judged the lease
 * since, and the first replica back renews it (a gap longer than its outage bound and a lease
 * valid at the last beat: the service's Outages), so a job taken meanwhile is not handed out
 * elsewhere. One clock: the database's. Needs SELECT on `rollcall.coordinator_beat` and on
 * `rollcall.instances` (`id`, `state`, `lease_expires_at`).
 */
export async function serviceAway(pool, instanceId, leaseTtlMs) {
  const { rows } = await pool.query(
    `SELECT b.beat_at < now() - $2::bigint * interval '1 millisecond'
              AND i.lease_expires_at > b.beat_at AS away
       FROM rollcall.coordinator_beat b, rollcall.instances i
      WHERE i.id = $1 AND i.state = 'live'`,
    [instanceId, leaseTtlMs],
  );
  return rows[0]?.away === true;
}
