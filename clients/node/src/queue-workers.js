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
// Of those, the one that takes jobs to execute them also counts an attempt; graphile-worker 0.18's
// statements that fail or return a pool's jobs name the pool's id as `$1` too, and never do.
const COUNTS_AN_ATTEMPT = /\battempts\s*=\s*(?:jobs\.)?attempts\s*\+\s*1\b/;

/** True for the statement by which a graphile-worker worker (or worker pool) takes jobs to run. */
export function takesJobs(text) {
  return typeof text === 'string' && TAKES_A_JOB.test(text) && COUNTS_AN_ATTEMPT.test(text);
}

/** What a statement that took no job answers: graphile-worker then waits for its next poll. */
const NO_JOB = Object.freeze({ command: 'UPDATE', rowCount: 0, oid: null, rows: [], fields: [] });

/**
 * The set of this process's queue worker ids, with a listener for each new one, and the gate by
 * which the Rollcall client stops them from taking new jobs (`holdJobs`) while its lease may be
 * gone and a peer may be taking over this process's runs.
 */
export class QueueWorkers {
  #ids = new Set();
  #listeners = new Set();
  #held = false;
  #heldFetches = 0;
  #takesOpen = 0;
  #waiting = [];

  /**
   * While true, a worker's statement that would take a job is answered "no job" without reaching
   * the database: graphile-worker takes nothing new, polls again later, and the jobs it runs
   * already go on and end as they would. Nothing is failed, unlocked or dropped.
   */
  get jobsHeld() {
    return this.#held;
  }

  /** Holds (true) or lets go (false) the taking of new jobs; returns true when that changed. */
  holdJobs(held) {
    const next = held === true;
    if (next === this.#held) return false;
    this.#held = next;
    return true;
  }

  /** How many statements that would have taken jobs were answered "no job" while held. */
  get heldFetches() {
    return this.#heldFetches;
  }

  /**
   * True when this query is a worker taking jobs while they are held: the pool answers it with
   * no job instead of sending it (see noticingPool).
   */
  holdsBack(config) {
    if (!this.#held) return false;
    const text = typeof config === 'string' ? config : config?.text;
    if (!takesJobs(text)) return false;
    this.#heldFetches++;
    return true;
  }

  /**
   * Counts a statement taking jobs sent to the database; returns what to call once it is answered.
   * So that `settled()` knows when no job can be taken any more.
   */
  takeSent() {
    this.#takesOpen++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      if (--this.#takesOpen === 0) for (const resolve of this.#waiting.splice(0)) resolve();
    };
  }

  /**
   * Resolves once no statement taking jobs is unanswered: while jobs are held, from then on this
   * process takes no new job until they are let go (a statement sent just before the hold may
   * still have taken one, and that job runs).
   */
  settled() {
    if (this.#takesOpen === 0) return Promise.resolve();
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

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
 * to `workers.noticeQuery` before sending it, and answer a worker's taking of jobs with no job
 * while `workers` holds them (`holdJobs`). `options` are the Pool's own.
 */
export function noticingPool(pg, options, workers) {
  const Base = pg.Client;
  class NoticingClient extends Base {
    query(config, values, callback) {
      workers.noticeQuery(config, values);
      if (workers.holdsBack(config)) return answerNoJob(config, values, callback);
      if (!takesJobs(typeof config === 'string' ? config : config?.text)) {
        return super.query(config, values, callback);
      }
      const answered = workers.takeSent();
      if (typeof values === 'function') return super.query(config, settling(values, answered));
      if (typeof callback === 'function') return super.query(config, values, settling(callback, answered));
      const result = super.query(config, values);
      if (typeof result?.then === 'function') result.then(answered, answered);
      else answered();
      return result;
    }
  }
  return new pg.Pool({ ...options, Client: NoticingClient });
}

/** Answers a query the way pg's Client#query would have, with no row: by callback or promise. */
function answerNoJob(config, values, callback) {
  const done = [callback, values, config?.callback].find((f) => typeof f === 'function');
  const result = { ...NO_JOB, rows: [], fields: [] };
  if (done) {
    process.nextTick(() => done(null, result));
    return undefined;
  }
  return Promise.resolve(result);
}

/** A query callback that first tells `answered`. */
function settling(callback, answered) {
  return (...args) => {
    answered();
    return callback(...args);
  };
}
