import { monotonicUlid } from './ulid.js';

/**
 * Enqueuing runs exactly as @workflow/world-postgres 4.3.x re-drives them on start: one
 * graphile-worker job per run, task `<jobPrefix>flows`, `max_attempts` 3, run now, no queue name,
 * and the engine's MessageData payload
 *
 *   {"attempt": 1, "messageId": "msg_<ULID>", "id": <workflow name>, "data": <base64 of {"runId": …}>}
 *
 * The one deliberate difference: no job key. The engine keys its own jobs with the message id;
 * a recovery job needs no key, and a key could only ever replace a run's own pending wake-up job
 * (graphile's default `replace` mode), never help.
 */

// The engine's queue names: `__wkf_workflow_<name>`, `__wkf_step_<name>`, or with a topic
// namespace `__<ns>_wkf_workflow_<name>`. Same rule as its parseQueueName.
const QUEUE_NAME = /^(__(?:[a-z][a-z0-9]*_)?wkf_(workflow|step)_)(.+)$/;

/** The graphile task identifier and the payload `id` for a run handed out by Rollcall. */
export function routeOf(run, jobPrefix = 'workflow_') {
  const m = typeof run.queueName === 'string' ? QUEUE_NAME.exec(run.queueName) : null;
  if (m) {
    return { task: `${jobPrefix}${m[2] === 'workflow' ? 'flows' : 'steps'}`, id: m[3] };
  }
  // No (or an unknown) queue name: a workflow run, routed by its workflow name.
  return { task: `${jobPrefix}flows`, id: run.workflowName };
}

const nextUlid = monotonicUlid();

/** A fresh engine message id, `msg_<monotonic ULID>`. */
export function newMessageId() {
  return `msg_${nextUlid()}`;
}

/**
 * The engine's MessageData for a workflow invocation of `runId` on sub-queue `id`: the body is the
 * JSON `{"runId": …}` the engine's own recovery sends, base64-encoded because graphile-worker
 * carries JSON.
 */
export function workflowMessage(id, runId, messageId = newMessageId()) {
  const body = Buffer.from(JSON.stringify({ runId }));
  return { attempt: 1, messageId, id, data: body.toString('base64') };
}

/** The graphile-worker job_spec rows (as JSON) for a batch of runs. */
export function jobSpecs(runs, { jobPrefix = 'workflow_', maxAttempts = 3 } = {}) {
  return runs.map((run) => {
    const { task, id } = routeOf(run, jobPrefix);
    return {
      identifier: task,
      payload: workflowMessage(id, run.runId),
      max_attempts: maxAttempts,
      // queue_name, run_at (now()), job_key, priority (0), flags: left null on purpose.
    };
  });
}

const IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/;

function quoteIdent(name) {
  if (!IDENT.test(name)) {
    throw new TypeError(`not a plain SQL identifier: ${JSON.stringify(name)}`);
  }
  return `"${name}"`;
}

/**
 * The built-in enqueuer: every run of a batch in ONE round trip, through graphile-worker's own
 * `add_jobs(job_spec[])` (which also creates the task row and sends the `jobs:insert`
 * notification that wakes idle workers), with the specs unpacked in the database by
 * `json_populate_recordset`. The statement is atomic: either every run of the batch got its job,
 * or none did and all are reported failed, so Rollcall hands them out again.
 *
 * @param {object} options
 * @param {{query: Function}} options.pool a `pg` Pool (or anything with pg's `query`)
 * @param {string} [options.jobPrefix] the engine's job prefix (`WORKFLOW_POSTGRES_JOB_PREFIX`)
 * @param {string} [options.schema] graphile-worker's schema
 * @returns {(runs: object[]) => Promise<{failedRunIds: string[]}>}
 */
export function graphileEnqueuer({ pool, jobPrefix = 'workflow_', schema = 'graphile_worker' } = {}) {
  if (!pool || typeof pool.query !== 'function') {
    throw new TypeError('graphileEnqueuer needs a pg Pool (options.pool)');
  }
  const s = quoteIdent(schema);
  const sql =
    `SELECT count(*)::int AS added FROM ${s}.add_jobs(` +
    `ARRAY(SELECT spec FROM json_populate_recordset(NULL::${s}.job_spec, $1::json) AS spec))`;
  return async function enqueue(runs) {
    if (runs.length === 0) return { failedRunIds: [] };
    const { rows } = await pool.query(sql, [JSON.stringify(jobSpecs(runs, { jobPrefix }))]);
    if (rows[0].added !== runs.length) {
      // Cannot happen without job keys; if it ever does, let Rollcall hand the batch out again.
      throw new Error(`graphile add_jobs added ${rows[0].added} jobs for ${runs.length} runs`);
    }
    return { failedRunIds: [] };
  };
}
