import { monotonicUlid } from './ulid.js';

/**
 * Enqueuing runs exactly as @workflow/world-postgres re-drives them on start: one graphile-worker
 * job per run, task `<jobPrefix>flows`, `max_attempts` 3, run now, no queue name, and the
 * engine's MessageData payload
 *
 *   {"attempt": 1, "messageId": "msg_<ULID>", "id": <workflow name>, "data": <base64 of {"runId": …}>}
 *
 * keyed, as the engine keys its own jobs, by that fresh message id: a key nobody else holds can
 * replace nothing, and it lets Rollcall map the execution of a recovery job (whose message id the
 * tracker reports) to the graphile worker that locked it.
 *
 * A run handed out WITH a `messageId` (the message that owns an interrupted step) is re-driven
 * with exactly that message id, so the runtime re-runs the step at once instead of waiting out its
 * inline-ownership lease; such a job gets NO key, since the engine's own job may still carry that
 * key and graphile's `replace` mode would overwrite (or fork) it.
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

/** True for a message id the engine accepts (`msg_…`). */
export function isMessageId(value) {
  return typeof value === 'string' && /^msg_[0-9A-Za-z_-]+$/.test(value);
}

/**
 * The graphile-worker job_spec rows (as JSON) for a batch of runs: a fresh message id, which is
 * also the job key, or the run's own `messageId` and no key.
 */
export function jobSpecs(runs, { jobPrefix = 'workflow_', maxAttempts = 3 } = {}) {
  return runs.map((run) => {
    const { task, id } = routeOf(run, jobPrefix);
    const owned = isMessageId(run.messageId);
    const messageId = owned ? run.messageId : newMessageId();
    const spec = {
      identifier: task,
      payload: workflowMessage(id, run.runId, messageId),
      max_attempts: maxAttempts,
      // queue_name, run_at (now()), priority (0), flags: left null on purpose.
    };
    if (!owned) spec.job_key = messageId;
    return spec;
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
      // Cannot happen: the only keys are fresh message ids. If it ever does, let Rollcall hand the
      // batch out again.
      throw new Error(`graphile add_jobs added ${rows[0].added} jobs for ${runs.length} runs`);
    }
    return { failedRunIds: [] };
  };
}
