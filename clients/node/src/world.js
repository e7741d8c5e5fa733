/**
 * Wiring for an application that runs @workflow/world-postgres (tested against 4.3.7 and
 * 5.0.0-beta.29).
 *
 * The engine executes a run when graphile-worker hands one of its jobs to a worker: the worker
 * POSTs the message to the app's own workflow (or step) endpoint, whose handler the workflow
 * runtime builds with `world.createQueueHandler(prefix, handler)`. That handler is the one place
 * where "this process is executing run R" is certain, so `trackWorld` wraps it.
 */

const WORKFLOW_PREFIX = /^__(?:[a-z][a-z0-9]*_)?wkf_workflow_$/;
const STEP_PREFIX = /^__(?:[a-z][a-z0-9]*_)?wkf_step_$/;

/** The run a queue message belongs to: `runId` for workflows, `workflowRunId` for steps. */
export function runIdOfMessage(prefix, message) {
  if (message == null || typeof message !== 'object') return undefined;
  if (WORKFLOW_PREFIX.test(prefix) && typeof message.runId === 'string') return message.runId;
  if (STEP_PREFIX.test(prefix) && typeof message.workflowRunId === 'string') {
    return message.workflowRunId;
  }
  return undefined;
}

/**
 * The queue message id of one delivery: the handler's `meta.messageId` (world-postgres 4.3 and the
 * 5.0 betas deliver it as the `x-vqs-message-id` header, which the queue handler passes on as
 * `meta.messageId`), else a `messageId` in the message itself.
 */
export function messageIdOf(message, meta) {
  if (meta && typeof meta.messageId === 'string' && meta.messageId !== '') return meta.messageId;
  if (message && typeof message === 'object' && typeof message.messageId === 'string' && message.messageId !== '') {
    return message.messageId;
  }
  return undefined;
}

const TRACKED = Symbol.for('rollcall.trackedWorld');

/**
 * Makes every queue handler the runtime creates from `world` report the execution it runs to
 * `tracker`: the run (workflow replays and steps alike) and the message id that delivered it.
 * Patches `world` in place, so the world instance the runtime already holds (`getWorld()`) is
 * covered; call it before the first request is served. Calling it again on the same world does
 * nothing.
 *
 * @param {object} [options]
 * @param {() => Promise<unknown> | undefined} [options.admit] called before each execution; when it
 *   returns a promise, the execution waits for it (the zero-code world uses this to hold back
 *   every delivery that arrives after shutdown began, so nothing new starts executing)
 * @returns the same world
 */
export function trackWorld(world, tracker, { admit } = {}) {
  if (!world || typeof world.createQueueHandler !== 'function') {
    throw new TypeError('trackWorld needs a World with createQueueHandler');
  }
  if (world[TRACKED]) return world;
  const original = world.createQueueHandler.bind(world);
  world.createQueueHandler = (prefix, handler) =>
    original(prefix, async (message, meta) => {
      const held = admit?.();
      if (held) await held;
      const runId = runIdOfMessage(prefix, message);
      if (!runId) return handler(message, meta);
      return tracker.wrap(runId, () => handler(message, meta), messageIdOf(message, meta));
    });
  Object.defineProperty(world, TRACKED, { value: true });
  return world;
}

/**
 * Starts a world-postgres world's queue (graphile-worker runner and utilities) WITHOUT the
 * engine's own boot recovery, which Rollcall replaces.
 *
 * In world-postgres 4.3.x and the 5.0 betas, `world.start()` is `queue.start()` followed by
 * `reenqueueActiveRuns(world.runs, …)`, which pages pending then running runs through
 * `world.runs.list` and enqueues every one; the world exposes no other way to start its queue. So
 * this calls `world.start()` while `world.runs.list` answers an empty page, and restores it
 * afterwards. Call it once at boot, before anything else lists runs.
 */
export async function startWorldWithoutRecovery(world) {
  const runs = world?.runs;
  if (!runs || typeof runs.list !== 'function' || typeof world.start !== 'function') {
    throw new TypeError('startWorldWithoutRecovery needs a world-postgres World (runs.list, start)');
  }
  const list = runs.list;
  runs.list = async () => ({ data: [], cursor: null, hasMore: false });
  try {
    await world.start();
  } finally {
    runs.list = list;
  }
}
