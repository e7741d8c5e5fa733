/**
 * The queue workers of this process, as Rollcall needs to know them.
 *
 * graphile-worker gives each of a process's concurrent workers an id of its own (`worker-<hex>`,
 * one per unit of concurrency: 50 in world-postgres 5.0, 10 in 4.3) and tells nobody: the engine
 * does not expose its runner. The id shows in one place, the statement by which a worker takes a
 * job (`… locked_by = $1 …` with the worker id as `$1`), which every worker sends as soon as the
 * runner starts and at every poll after that. A pg Pool built with `noticingPool` reads that
 * parameter, so a process knows all its worker ids from its first poll, before any of them holds
 * a job, and names them to Rollcall; when the process dies, Rollcall then releases every job lock
 * its workers hold at once, not only the locks of the jobs the process had reported.
 *
 * From graphile-worker 0.17 the pool takes and locks jobs under one id for all its workers (the
 * pool's): the same statement shape carries it as `$1`, so the set then holds that one id
 * (test/world-graphile.test.js runs 0.18.0).
 */

/** Rollcall keeps at most this many worker ids per instance. */
export const MAX_QUEUE_WORKERS = 1000;

// The statement by which a graphile-worker (0.16) worker, or (from 0.17) a worker pool, takes a job
// sets the lock columns to its id, the statement's first parameter.
const TAKES_A_JOB = /\blocked_by\s*=\s*\$1(?:::text)?\b/;

/** The set of this process's queue worker ids, with a listener for each new one. */
export class QueueWorkers {
  #ids = new Set();
  #listeners = new Set();

  /** The ids seen so far, in the order they were first seen. */
  list() {
    return [...this.#ids];
  }

  get size() {
    return this.#ids.size;
  }

  /** Calls `listener(id)` for every id seen from now on; returns the function that stops it. */
  onNew(listener) {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Adds a worker id; returns true when it was new. */
  add(id) {
    if (typeof id !== 'string' || id === '' || id.length > 200 || this.#ids.has(id)) return false;
    if (this.#ids.size >= MAX_QUEUE_WORKERS) return false;
    this.#ids.add(id);
    for (const listener of this.#listeners) {
      try {
        listener(id);
      } catch {
        // a listener's failure is its own
      }
    }
    return true;
  }

  /**
   * Looks at one query as pg's `Client#query(config, values)` receives it; when it is a worker
   * taking a job, adds the worker's id. Cheap for every other query: one substring test.
   */
  noticeQuery(config, values) {
    const text = typeof config === 'string' ? config : config?.text;
    if (typeof text !== 'string' || !text.includes('locked_by')) return;
    const params = Array.isArray(values) ? values : config?.values;
    if (!Array.isArray(params) || typeof params[0] !== 'string') return;
    if (TAKES_A_JOB.test(text)) this.add(params[0]);
  }
}

/**
 * A pg Pool (of the `pg` module given, the one the engine uses) whose clients report every query
 * to `workers.noticeQuery` before sending it. `options` are the Pool's own.
 */
export function noticingPool(pg, options, workers) {
  const Base = pg.Client;
  class NoticingClient extends Base {
    query(config, values, callback) {
      workers.noticeQuery(config, values);
      return super.query(config, values, callback);
    }
  }
  return new pg.Pool({ ...options, Client: NoticingClient });
}
