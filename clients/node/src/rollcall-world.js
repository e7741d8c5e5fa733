/**
 * The zero-code wiring: a Workflow SDK world module (`@rollcall/client/world`) that an application
 * selects with `WORKFLOW_TARGET_WORLD=@rollcall/client/world` instead of
 * `@workflow/world-postgres`. It creates the world-postgres world from the environment the stock
 * world reads, and adds Rollcall: every queue handler reports the execution it runs, the queue
 * starts without the engine's boot re-enqueue, and the process registers, heartbeats its
 * in-flight set, claims its deploy's boot recovery and dead peers' runs, and on SIGTERM/SIGINT
 * stops taking jobs, leaves with its in-flight set and exits.
 *
 * The SDK loads a world module by calling its `createWorld()` (both the 4.x runtime, which
 * `require`s the module and calls it synchronously, and the 5.0 line, which awaits it), possibly
 * more than once per process (`getWorld` and `getWorldHandlers` each create one). All worlds of
 * one process share one tracker and one Rollcall client.
 */
import { createRequire } from 'node:module';
import { constants, hostname } from 'node:os';
import { join } from 'node:path';
import { startRecovery } from './client.js';
import { toLogger } from './log.js';
import { noticingPool, QueueWorkers } from './queue-workers.js';
import { createTracker } from './tracker.js';
import { startWorldWithoutRecovery, trackWorld } from './world.js';

/** The environment variables the world module reads, with what each one is. */
export const WORLD_SETTINGS = {
  ROLLCALL_URL: 'the Rollcall service, e.g. http://rollcall:8080',
  ROLLCALL_NAMESPACE: 'the namespace configured in Rollcall',
  ROLLCALL_SECRET: "the namespace's registration secret",
  ROLLCALL_DEPLOYMENT_ID: 'identical for all replicas of one rollout, new for the next',
  WORKFLOW_POSTGRES_URL: "the engine's database (the stock world reads it too)",
};

const PROCESS_STATE = Symbol.for('rollcall.world.process');
const SIGNALS = ['SIGTERM', 'SIGINT'];

/** Reads and checks the settings; throws one Error naming every missing or bad variable. */
export function worldSettings(env = process.env) {
  const problems = [];
  const required = (name) => {
    const value = env[name];
    if (typeof value !== 'string' || value.trim() === '') {
      problems.push(`${name} is not set (${WORLD_SETTINGS[name]})`);
      return undefined;
    }
    return value.trim();
  };
  const url = required('ROLLCALL_URL');
  if (url !== undefined) {
    let parsed = null;
    try {
      parsed = new URL(url);
    } catch {
      // reported below
    }
    if (!parsed || !['http:', 'https:'].includes(parsed.protocol)) {
      problems.push(`ROLLCALL_URL is not an http(s) URL: ${JSON.stringify(url)}`);
    }
  }
  const settings = {
    url,
    namespace: required('ROLLCALL_NAMESPACE'),
    registrationSecret: required('ROLLCALL_SECRET'),
    deploymentId: required('ROLLCALL_DEPLOYMENT_ID'),
    databaseUrl: required('WORKFLOW_POSTGRES_URL'),
    name: env.ROLLCALL_NAME?.trim() || hostname(),
    jobPrefix: env.WORKFLOW_POSTGRES_JOB_PREFIX || 'workflow_',
    fallback: env.ROLLCALL_FALLBACK?.trim() || 'skip',
    worldPackage: env.ROLLCALL_WORLD_PACKAGE?.trim() || '@workflow/world-postgres',
  };
  if (!['skip', 'local'].includes(settings.fallback)) {
    problems.push(`ROLLCALL_FALLBACK is 'skip' or 'local', not ${JSON.stringify(settings.fallback)}`);
  }
  if (problems.length) {
    throw new Error(`@rollcall/client/world: ${problems.join('; ')}`);
  }
  return settings;
}

/**
 * Loads the world package (and the `pg` it uses) the way the SDK's own loader does: from the
 * application (the working directory) first, then from this package's location. Synchronous,
 * because the 4.x runtime calls `createWorld()` synchronously.
 */
function loadWorldPackage(name) {
  const tried = [];
  for (const base of [join(process.cwd(), 'index.js'), import.meta.url]) {
    const require = createRequire(base);
    let path;
    try {
      path = require.resolve(name);
    } catch {
      tried.push(String(base));
      continue;
    }
    const mod = require(path);
    if (typeof mod.createWorld !== 'function') {
      throw new Error(`@rollcall/client/world: ${name} (${path}) exports no createWorld function`);
    }
    const pg = createRequire(path)('pg');
    return { createWorld: mod.createWorld, pg: pg.Pool ? pg : pg.default, path };
  }
  throw new Error(
    `@rollcall/client/world: cannot find ${name}; install it next to @rollcall/client ` +
      `(or set ROLLCALL_WORLD_PACKAGE), looked from ${tried.join(' and ')}`,
  );
}

/** One per process: the tracker every world reports to, and the one Rollcall client. */
function processState() {
  globalThis[PROCESS_STATE] ??= {
    tracker: createTracker(),
    // The graphile-worker ids of this process, read off the engine's own pool (queue-workers.js).
    workers: new QueueWorkers(),
    client: null,
    pool: null,
    stopping: null,
    worlds: new Map(), // each open world of this process -> {close: its engine close(), started}
    hold: null,
  };
  return globalThis[PROCESS_STATE];
}

/**
 * Creates a world-postgres world wired to Rollcall. The SDK calls this (`WORKFLOW_TARGET_WORLD`);
 * an application may call it too. Settings come from the environment (see WORLD_SETTINGS and the
 * README); `options.logger` and `options.fetch` are passed to the client.
 */
export function createWorld(options = {}) {
  const settings = worldSettings(process.env);
  const state = processState();
  const engine = loadWorldPackage(settings.worldPackage);
  // The engine's pool is built here, so that every graphile worker's id is known from its first
  // poll; everything else is what the stock factory reads from the environment itself.
  const enginePool = noticingPool(engine.pg, enginePoolOptions(settings, process.env), state.workers);
  const world = engine.createWorld(engineConfig(enginePool, process.env));
  trackWorld(world, state.tracker, {
    // After shutdown began, a delivery that reaches a handler never starts executing: the process
    // exits right after it left Rollcall, and the job's lock is released by the service.
    admit: () => state.hold,
  });
  const ensureClient = () => {
    if (state.client || state.stopping) return state.client;
    state.pool = new engine.pg.Pool({ connectionString: settings.databaseUrl, max: 2 });
    state.pool.on('error', () => {}); // an idle client's error: the next query reports it
    const logger = toLogger(options.logger);
    state.client = startRecovery({
      url: settings.url,
      namespace: settings.namespace,
      registrationSecret: settings.registrationSecret,
      deploymentId: settings.deploymentId,
      name: settings.name,
      pool: state.pool,
      jobPrefix: settings.jobPrefix,
      inFlight: state.tracker,
      queueWorkers: state.workers,
      fallback: settings.fallback,
      // The engine's own full re-enqueue, for fallback 'local': the stock start() on a started queue.
      localRecovery: () => stockStart(),
      stopTimeoutMs: 2_000,
      logger,
      fetch: options.fetch,
    });
    for (const signal of SIGNALS) process.on(signal, onSignal);
    return state.client;
  };

  const stockStart = world.start.bind(world);
  const stockQueue = world.queue.bind(world);
  // Given a pool, the engine's close() leaves it open: it is ended here, after the engine's.
  const engineClose = world.close?.bind(world) ?? (async () => {});
  const stockClose = async () => {
    try {
      await engineClose();
    } finally {
      await enginePool.end().catch(() => {});
    }
  };
  const entry = { close: stockClose, started: false };
  state.worlds.set(world, entry);

  // The engine's start() is queue.start() and then its re-enqueue of every active run in every
  // replica; Rollcall replaces the second half.
  world.start = async () => {
    entry.started = true;
    await startWorldWithoutRecovery({ runs: world.runs, start: stockStart });
    ensureClient();
  };
  // queue() starts the engine's queue (and its graphile runner) too, without start(): a process
  // that enqueues also executes, so it takes part in Rollcall as well.
  world.queue = (...args) => {
    entry.started = true;
    ensureClient();
    return stockQueue(...args);
  };
  // A programmatic close stops the queue (graphile lets running jobs finish); once no started
  // world is left open, the process leaves.
  world.close = async () => {
    state.worlds.delete(world);
    await stockClose();
    if (![...state.worlds.values()].some((w) => w.started)) await stopClient(state);
  };
  return world;
}

export default createWorld;

/**
 * The options of the engine's pg pool: what the stock factory would give its own pool (the
 * connection string and WORKFLOW_POSTGRES_MAX_POOL_SIZE; pg's default size otherwise).
 */
export function enginePoolOptions(settings, env) {
  const max = parseInt(env.WORKFLOW_POSTGRES_MAX_POOL_SIZE || '', 10);
  return {
    connectionString: settings.databaseUrl,
    ...(Number.isFinite(max) && max > 0 ? { max } : {}),
  };
}

/**
 * The configuration the stock factory builds from the environment when called without one
 * (world-postgres 4.3 and 5.0), with `pool` added. Left unset, the concurrency falls back to the
 * engine's own default (10 in 4.3, 50 in 5.0), as it does without Rollcall.
 */
export function engineConfig(pool, env) {
  const concurrency = parseInt(env.WORKFLOW_POSTGRES_WORKER_CONCURRENCY || '', 10);
  return {
    pool,
    jobPrefix: env.WORKFLOW_POSTGRES_JOB_PREFIX,
    ...(Number.isFinite(concurrency) && concurrency > 0 ? { queueConcurrency: concurrency } : {}),
    applicationManagedShutdown: env.WORKFLOW_POSTGRES_APPLICATION_MANAGED_SHUTDOWN === '1',
  };
}

/** The Rollcall client of this process, once a world has started (null before). */
export function rollcallClient() {
  return globalThis[PROCESS_STATE]?.client ?? null;
}

async function stopClient(state) {
  state.stopping ??= (async () => {
    for (const signal of SIGNALS) process.removeListener(signal, onSignal);
    await state.client?.stop();
    await state.pool?.end().catch(() => {});
  })();
  return state.stopping;
}

/**
 * SIGTERM/SIGINT: stop taking jobs, leave with the in-flight set (an exiting leave), exit at
 * once. Running executions are not waited for: Rollcall declares this instance gone after its
 * departure grace (1 s by default), releases its queue locks and a peer re-runs them, which is the
 * point of leaving (a slow step would otherwise hold its run until it ends). A plain leave would
 * release the locks while the process may still be executing. The listener stays installed until the exit, so graphile-worker's own
 * handler re-raising the signal cannot end the process before the leave.
 */
function onSignal(signal) {
  const state = globalThis[PROCESS_STATE];
  if (!state || state.hold) return;
  state.hold = new Promise(() => {}); // never resolves: nothing new starts executing
  // Stop fetching jobs. close() waits for running jobs, which this process will not do.
  for (const { close } of state.worlds.values()) close().catch(() => {});
  const code = 128 + (constants.signals[signal] ?? 15);
  const exit = () => process.exit(code);
  // Bounded: the leave has its own request timeout; never hang on shutdown.
  setTimeout(exit, 15_000).unref();
  // An exiting leave: executions still running here stop only when the process exits, so
  // Rollcall releases this process's queue locks (and opens its takeover) only after a short
  // departure grace, by which time the process is gone.
  state.client
    .stop({ exiting: true })
    .catch(() => {})
    .finally(exit);
}
