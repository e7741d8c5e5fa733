// A minimal HTTP server for the workflows in ./workflows, built by the SDK's own `wf build`
// (`npm run build`) into .well-known/workflow/v1/{flow,step,webhook}.mjs. It serves the generated
// routes, plus three small routes to drive it:
//
//   POST /start        {"workflow": "fulfil" | "remind" | ..., "args": [...],
//                       "attributes": {...} (optional: the run's initial attributes)}    → {"runId"}
//   POST /hooks/:token {...payload}   resumes the run parked on that hook              → {"runId"}
//   GET  /health
//
// The world is whatever WORKFLOW_TARGET_WORLD selects (here @workflow/world-postgres, configured
// by WORKFLOW_POSTGRES_URL). PORT must be set: the queue's workers deliver each message to this
// process's own flow route on it.
//
// Recovery after a crash, chosen by E2E_RECOVERY:
//   engine    (default) `world.start()`, the engine's own boot recovery: every replica that boots
//             re-enqueues every active run
//   rollcall  the queue starts without that recovery and the Rollcall client takes part in the
//             deploy's shared, owner-aware recovery (ROLLCALL_URL, ROLLCALL_NAMESPACE,
//             ROLLCALL_SECRET, ROLLCALL_DEPLOYMENT_ID), wired with its programmatic API
//   world     the world module itself does the recovery (a WORKFLOW_TARGET_WORLD that wraps
//             world-postgres); this server only starts it
//
// Every flow delivery and every step execution is written as a JSON line on stdout
// ({"event": "flow-start" | "flow-end" | "step-start" | "step-end", "runId", "messageId", ...,
// "pid", "t"}), so a test can tell which process ran what, when, and how often.
//
// Test only: with E2E_TEAR_ON_PURPOSE=1 the process dies between two of the engine's writes when
// the database refuses the second with "rollcall-e2e: torn on purpose" (a trigger the test
// installs; see tearOnPurpose below).
import { existsSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pathToFileURL } from 'node:url';

// Everything is loaded from the application directory this server runs in (the working
// directory), so the same server serves an app of either SDK line: the 5.0 line's bundles are ES
// modules (`.mjs`), the 4.x line's CommonJS (`.js`).
const app = process.cwd();
const requireFromApp = createRequire(join(app, 'package.json'));
const load = (specifier) => import(pathToFileURL(requireFromApp.resolve(specifier)).href);
const bundle = (name) => {
  const base = join(app, '.well-known', 'workflow', 'v1', name);
  const file = existsSync(`${base}.mjs`) ? `${base}.mjs` : `${base}.js`;
  return import(pathToFileURL(file).href).then((mod) => (mod.POST ? mod : (mod.default ?? mod)));
};
const { getHookByToken, resumeHook, start } = await load('workflow/api');
const runtime = await load('@workflow/core/runtime');
const flowRoute = await bundle('flow');
const stepRoute = await bundle('step');
const webhookRoute = await bundle('webhook');
const manifest = JSON.parse(
  await import('node:fs/promises').then((fs) =>
    fs.readFile(join(app, '.well-known', 'workflow', 'v1', 'manifest.json'), 'utf8'),
  ),
);

const journal = (event, fields = {}) =>
  process.stdout.write(`${JSON.stringify({ event, ...fields, pid: process.pid, t: Date.now() })}\n`);
globalThis.rollcallExampleJournal = journal;
// The last line a process writes: after it, no code of this process runs (stdout on a pipe or a
// file is written synchronously on Linux and macOS).
process.on('exit', (code) => journal('exit', { code }));

const port = Number(process.env.PORT);
if (!Number.isInteger(port) || port <= 0) {
  console.error('PORT must be set: the queue delivers messages to this process on it');
  process.exit(2);
}

const workflows = Object.fromEntries(
  Object.values(manifest.workflows).flatMap((byName) =>
    Object.entries(byName).map(([name, { workflowId }]) => [name, { workflowId }]),
  ),
);

// The 5.0 runtime resolves WORKFLOW_TARGET_WORLD when a framework bundles the app; a plain Node
// server loads the module itself and hands the world to the runtime, as the SDK's own test server
// (@workflow/world-testing) does. The 4.x runtime reads WORKFLOW_TARGET_WORLD itself.
const target = process.env.WORKFLOW_TARGET_WORLD ?? '@workflow/world-postgres';
let world;
if (typeof runtime.createWorldFromModule === 'function') {
  world = await runtime.createWorldFromModule(
    await (target.startsWith('.') ? import(pathToFileURL(join(app, target)).href) : load(target)),
  );
  runtime.setWorld(world);
} else {
  process.env.WORKFLOW_TARGET_WORLD = target;
  world = await runtime.getWorld();
}
const recovery = process.env.E2E_RECOVERY ?? 'engine';

// Test only (E2E_TEAR_ON_PURPOSE=1): world-postgres 5.0.0-beta.29 writes some state changes as two
// autocommitted statements (a step's completion: the step row, then its `step_completed` event; a
// sleep's creation and completion: the wait row, then its event). The end-to-end suite installs a
// trigger that refuses the event's INSERT, once, for a run it armed; when `events.create` fails
// with that refusal, the first statement has committed and the second never will: this process
// journals `torn` and kills itself at once, leaving exactly what a crash between the two leaves.
const TORN_ON_PURPOSE = 'rollcall-e2e: torn on purpose';
function tearOnPurpose(events) {
  const create = events.create.bind(events);
  const refusedOnPurpose = (error) => {
    for (let e = error; e; e = e.cause) {
      if (String(e.message ?? '').includes(TORN_ON_PURPOSE)) return true;
    }
    return false;
  };
  events.create = async (runId, data, params) => {
    try {
      return await create(runId, data, params);
    } catch (error) {
      if (refusedOnPurpose(error)) {
        journal('torn', { runId, kind: data?.eventType, correlationId: data?.correlationId });
        process.kill(process.pid, 'SIGKILL');
      }
      throw error;
    }
  };
}
if (process.env.E2E_TEAR_ON_PURPOSE === '1') tearOnPurpose(world.events);

// Test only (E2E_SURVIVE_DB_RESTART=1): world-postgres 5.0.0-beta.29's stream listener is a `pg`
// Client holding a LISTEN with no 'error' listener, so a database restart (which ends every
// session with 57P01) is an unhandled 'error' event and the process exits. With this set, that one
// error is journaled and the process lives on, as it would on a world that handled it; any other
// uncaught error still ends the process as Node would.
if (process.env.E2E_SURVIVE_DB_RESTART === '1') {
  process.on('uncaughtException', (error) => {
    const code = error?.code;
    if (code === '57P01' || String(error?.message ?? '').includes('Connection terminated')) {
      journal('db-connection-lost', { code, message: String(error?.message ?? error) });
      return;
    }
    console.error(error);
    process.exit(1);
  });
}

// Every message this process's runtime sends, journaled once the queue took it. A delivery that
// hands its run on (the runtime re-schedules a replay that ran past its time) sends its
// successor's message as its last act, and a peer may start that message a few milliseconds
// before this delivery has returned: the suite tells such a hand-off from two replays at once.
// Rollcall's re-drives are added to the queue by its client directly and are not journaled here.
// A process may end after the queue took a message and before its `queued` line: the `sending`
// line before it tells the suite that this process sent one more message of the run then (the
// engine's message ids are ULIDs, which carry the millisecond they were made).
const sendMessage = world.queue.bind(world);
world.queue = async (queueName, message, opts) => {
  const runId = message?.runId ?? message?.workflowRunId;
  journal('sending', { runId });
  const sent = await sendMessage(queueName, message, opts);
  journal('queued', { runId, messageId: sent?.messageId });
  return sent;
};

/** Reads a web Request from a Node request. */
function toRequest(req) {
  const body = req.method === 'GET' || req.method === 'HEAD' ? undefined : Readable.toWeb(req);
  return new Request(`http://127.0.0.1:${port}${req.url}`, {
    method: req.method,
    headers: req.headers,
    body,
    duplex: 'half',
  });
}

/** Writes a web Response to a Node response. */
async function send(res, response) {
  res.writeHead(response.status, Object.fromEntries(response.headers));
  if (response.body) {
    for await (const chunk of response.body) res.write(chunk);
  }
  res.end();
}

const json = (status, value) =>
  new Response(JSON.stringify(value), { status, headers: { 'content-type': 'application/json' } });

/** The flow route, journaled: one line when a delivery starts and one when it ends. */
async function flow(request) {
  const messageId = request.headers.get('x-vqs-message-id') ?? undefined;
  const text = await request.text();
  let runId;
  try {
    runId = JSON.parse(text).runId;
  } catch {
    // a health check or a message without a run
  }
  journal('flow-start', { runId, messageId });
  let status = 0;
  try {
    const response = await flowRoute.POST(
      new Request(request.url, { method: 'POST', headers: request.headers, body: text }),
    );
    status = response.status;
    return response;
  } finally {
    journal('flow-end', { runId, messageId, status });
  }
}

async function route(req) {
  const url = new URL(req.url, 'http://localhost');
  const path = url.pathname;
  if (path === '/.well-known/workflow/v1/flow') return flow(toRequest(req));
  // In the 4.x line steps have their own queue and route; in 5.0 the flow runs them inline.
  if (path === '/.well-known/workflow/v1/step' && stepRoute.POST) return stepRoute.POST(toRequest(req));
  if (path.startsWith('/.well-known/workflow/v1/webhook/')) return webhookRoute.POST(toRequest(req));
  if (path === '/health') return json(200, { ok: true, pid: process.pid });
  if (req.method === 'POST' && path === '/start') {
    const { workflow, args = [], attributes } = await toRequest(req).json();
    const target = workflows[workflow];
    if (!target) return json(404, { error: `no workflow ${workflow}` });
    const run = await start(target, args, ...(attributes ? [{ attributes }] : []));
    return json(200, { runId: run.runId });
  }
  if (req.method === 'POST' && path.startsWith('/hooks/')) {
    const hook = await getHookByToken(decodeURIComponent(path.slice('/hooks/'.length)));
    const { runId } = await resumeHook(hook.token, await toRequest(req).json());
    return json(200, { runId });
  }
  return json(404, { error: 'not found' });
}

const server = createServer((req, res) => {
  route(req)
    .then((response) => send(res, response))
    .catch((error) => {
      journal('error', { url: req.url, message: String(error?.message ?? error) });
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: String(error?.message ?? error) }));
    });
});
await new Promise((resolve) => server.listen(port, '127.0.0.1', resolve));
journal('listening', { port, recovery });

if (recovery === 'rollcall') {
  const { wireRollcall } = await import('./rollcall.mjs');
  await wireRollcall(world, journal);
} else {
  await world.start?.();
}
// With the zero-code world module: when the Rollcall client holds new queue jobs back and lets
// them go (a 'jobs-held' line is written once no statement taking jobs sent before the hold is
// unanswered, with this process's queue worker ids: from then on none of them takes a job until
// 'jobs-resumed'), and when its lease lapses and it registers.
const rollcallWorld = globalThis[Symbol.for('rollcall.world.process')];
if (rollcallWorld?.client) {
  const { client, workers } = rollcallWorld;
  client.on('jobs-held', ({ instanceId, reason }) =>
    workers.settled().then(() => journal('jobs-held', { instanceId, reason, workers: workers.list() })),
  );
  client.on('jobs-resumed', ({ instanceId, reason }) => journal('jobs-resumed', { instanceId, reason }));
  client.on('lease-lapsed', ({ instanceId }) => journal('lease-lapsed', { instanceId }));
  client.on('registered', ({ instanceId }) => journal('registered', { instanceId }));
}
journal('started', { recovery });
