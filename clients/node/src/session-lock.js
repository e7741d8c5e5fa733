// The session lock: one dedicated database session (a pg Client, never a pool that multiplexes
// transactions) holding the session advisory lock the service named at registration, for as long
// as the instance is registered. PostgreSQL releases the lock the moment the session ends, so a
// process that dies (kill -9, OOM kill, crash) is seen dead in about a second instead of a lease.
//
// What it reports in each heartbeat, as `sessionLock`:
//   { state: 'held', pid, reconnected }  the lock is held by backend `pid` (seen in pg_locks when taken);
//                                        `reconnected` once after it was taken again in a new session
//   { state: 'lost' }                    the session ended; reconnecting (the service keeps the lease)
//   { state: 'unavailable' }             it cannot be held: someone else holds the key (a collision),
//                                        or the connection is multiplexed by a transaction-pooling
//                                        proxy (the backend changed under an open session); the
//                                        service keeps the lease for this instance

const RECONNECT_MIN_MS = 50;
const RECONNECT_MAX_MS = 2_000;

// Whether this session's backend holds the lock: read once, right after taking it. pg_locks copies
// the server's whole lock table (every instance's session lock), so the check before each
// heartbeat reads only the backend pid; the service looks at pg_locks itself when a report could
// change what it records, and its checks watch every lock.
const HELD_BY_ME = `SELECT pg_backend_pid() AS pid, EXISTS (SELECT 1 FROM pg_locks
  WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND pid = pg_backend_pid()
    AND classid = $1::int::oid AND objid = $2::int::oid) AS held`;

/**
 * Holds the lock `keys` ({ classId, objId }) in its own session made by `connect()` (which returns
 * a connected pg Client). `onChange()` is called whenever the state to report changes.
 */
export class SessionLock {
  #connect;
  #keys;
  #log;
  #onChange;
  #client = null;
  #pid = null;
  #lastPid = null;
  #state = 'lost';
  #reason = 'connecting';
  #reconnected = false;
  #sessions = 0;
  #closed = false;
  #timer = null;
  #attempt = 0;

  constructor({ connect, keys, log, onChange }) {
    this.#connect = connect;
    this.#keys = keys;
    this.#log = log;
    this.#onChange = onChange ?? (() => {});
  }

  /** `held`, `lost` or `unavailable`. */
  get state() {
    return this.#state;
  }

  /** Why the state is not `held`: `connecting`, `session-ended`, `taken`, `pooled`, `error`. */
  get reason() {
    return this.#state === 'held' ? null : this.#reason;
  }

  /** The backend pid holding the lock, while held. */
  get pid() {
    return this.#state === 'held' ? this.#pid : null;
  }

  /** Takes the lock; resolves once the first attempt settled (never rejects). */
  async start() {
    await this.#take();
  }

  /**
   * Re-checks that the session is still on the backend that took the lock; run before each
   * heartbeat, in constant time. A backend that changed while the session never ended means a
   * proxy multiplexes it. A session that ended errors here, and its 'end' or 'error' event
   * reconnects.
   */
  async verify() {
    if (this.#state !== 'held' || !this.#client) return;
    const client = this.#client;
    try {
      const { rows } = await client.query('SELECT pg_backend_pid() AS pid');
      if (client !== this.#client) return;
      if (rows[0].pid !== this.#pid) {
        this.#unavailable('pooled', 'the database backend changed under an open session: a transaction-pooling proxy?');
      }
    } catch (error) {
      // The session is ending; its 'end' or 'error' event reconnects.
      this.#log.debug('session lock check failed', { error });
    }
  }

  /** The report for the next heartbeat; `reconnected` is reported once. */
  report() {
    if (this.#state !== 'held') return { state: this.#state };
    const report = { state: 'held', pid: this.#pid, reconnected: this.#reconnected };
    this.#reconnected = false;
    return report;
  }

  /** Releases the lock by ending the session. */
  async close() {
    this.#closed = true;
    clearTimeout(this.#timer);
    const client = this.#client;
    this.#client = null;
    if (client) await client.end().catch(() => {});
  }

  async #take() {
    if (this.#closed || this.#state === 'unavailable') return;
    let client;
    try {
      client = await this.#connect();
    } catch (error) {
      this.#retry('error', error);
      return;
    }
    if (this.#closed) {
      await client.end().catch(() => {});
      return;
    }
    client.on('error', (error) => this.#ended(client, error));
    client.on('end', () => this.#ended(client));
    this.#client = client;
    try {
      const { rows } = await client.query(
        'SELECT pg_try_advisory_lock($1::int, $2::int) AS taken, pg_backend_pid() AS pid',
        [this.#keys.classId, this.#keys.objId],
      );
      if (!rows[0].taken) {
        if (this.#sessions === 0) {
          this.#unavailable('taken', 'another session holds this instance lock key (a key collision)');
          return;
        }
        // Taken again after a reconnect: most likely this process's own previous session, which
        // the server has not seen end yet. End it (same role), then try again.
        if (this.#lastPid != null) {
          await client
            .query(
              `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted
                AND objsubid = 2 AND classid = $1::int::oid AND objid = $2::int::oid AND pid = $3`,
              [this.#keys.classId, this.#keys.objId, this.#lastPid],
            )
            .catch(() => {});
        }
        throw new Error('the lock is still held by a previous session');
      }
      const check = await client.query(HELD_BY_ME, [this.#keys.classId, this.#keys.objId]);
      if (check.rows[0].pid !== rows[0].pid || !check.rows[0].held) {
        this.#unavailable('pooled', 'the lock is not held by this session: a transaction-pooling proxy?');
        return;
      }
      if (this.#closed) return; // stopped meanwhile: close() ended this session
      this.#pid = rows[0].pid;
      this.#lastPid = this.#pid;
      this.#reconnected = this.#sessions++ > 0;
      this.#attempt = 0;
      this.#state = 'held';
      this.#log.info('session lock held', { pid: this.#pid, reconnected: this.#reconnected });
      this.#onChange();
    } catch (error) {
      if (client === this.#client) this.#ended(client, error);
    }
  }

  #ended(client, error) {
    if (client !== this.#client) return;
    this.#client = null;
    client.end().catch(() => {});
    if (this.#closed || this.#state === 'unavailable') return;
    this.#retry('session-ended', error);
  }

  #retry(reason, error) {
    const was = this.#state;
    this.#state = 'lost';
    this.#reason = reason;
    this.#pid = null;
    if (was !== 'lost') {
      this.#log.warn('session lock lost; reconnecting', { error });
      this.#onChange();
    }
    const ceiling = Math.min(RECONNECT_MAX_MS, RECONNECT_MIN_MS * 2 ** Math.min(this.#attempt++, 10));
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.#take(), ceiling / 2 + Math.random() * (ceiling / 2));
  }

  #unavailable(reason, message) {
    this.#state = 'unavailable';
    this.#reason = reason;
    this.#pid = null;
    this.#log.warn(`session lock unavailable: ${message}; the service keeps the lease for this instance`, {
      reason,
    });
    const client = this.#client;
    this.#client = null;
    // Ending the session releases whatever it took, so a colliding peer keeps its own lock.
    if (client) client.end().catch(() => {});
    this.#onChange();
  }
}

/**
 * How the client opens its dedicated session, from its options: `sessionLock: false` turns the
 * lock off; `sessionLock: () => connectedPgClient` supplies the session; otherwise a connection
 * string (`connectionString`, or the one of the given `pool`) turns it on. Null when off.
 */
export function sessionConnector(options) {
  const { sessionLock, connectionString, pool } = options;
  if (sessionLock === false) return null;
  if (typeof sessionLock === 'function') return sessionLock;
  const url = connectionString ?? pool?.options?.connectionString;
  if (!url) return null;
  return async () => openSession(pool?.Client ?? (await import('pg')).default.Client, url);
}

/**
 * A connected session of its own, made with the given pg `Client` class: TCP keepalive on, so a
 * session behind a dead network path ends within the kernel's keepalive time.
 */
export async function openSession(Client, connectionString) {
  const client = new Client({ connectionString, application_name: 'rollcall-session-lock', keepAlive: true });
  try {
    await client.connect();
  } catch (error) {
    client.end().catch(() => {});
    throw error;
  }
  return client;
}
