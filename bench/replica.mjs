// One application replica for the benchmarks and the chaos suite, run as its own process.
// Configured by the JSON in ROLLCALL_BENCH_REPLICA; reports JSON lines on stdout.
//
//   mode         "engine": @workflow/world-postgres' own boot recovery, as the published package
//                does it (`reenqueueActiveRuns` after the queue started);
//                "rollcall": the engine's queue started WITHOUT that recovery, and the Rollcall
//                client taking part in the deploy's shared recovery with its graphile enqueuer;
//                "bystander": started as a "rollcall" replica is (its world too, unless
//                withoutEngine), but taking no part in recovery: after "go" it only waits for
//                "leave", then closes and exits as a replica does
//   dbUrl        the engine's database
//   url, namespace, secret, deploymentId, name, maxRuns     (rollcall mode)
//   waitForGo    print "ready", then wait for a line "go" on stdin before recovering (timing)
//   inFlight     run ids this replica reports as executing for its whole life (rollcall mode)
//   stayAlive    after recovery, keep running (heartbeating) until killed or told "leave"
//   withoutEngine  (rollcall mode) the client alone, no engine world in the process
//   sessionLock  false: no session lock (the lease alone notices a death); default on
//   enqueueDelayMs  (rollcall mode) a pause around each batch's enqueue, half before it and half
//                between the enqueue and the complete, so that a recovery lasts long enough for
//                the chaos suite's kills to land inside batches on both sides of their enqueue;
//                a line "pace <ms>" on stdin changes it at any time (0 ends the pauses)
//
// WORKFLOW_LOCAL_BASE_URL should point at a port nobody listens on: the engine's workers then
// wait for their executor and never run the jobs being counted.
import { createInterface } from 'node:readline';
import { reenqueueActiveRuns } from '@workflow/world';
import { createWorld } from '@workflow/world-postgres';
import pg from 'pg';
import { graphileEnqueuer, openSession, startRecovery, startWorldWithoutRecovery } from '../clients/node/src/index.js';

const config = JSON.parse(process.env.ROLLCALL_BENCH_REPLICA);
const out = (event, fields = {}) => process.stdout.write(JSON.stringify({ event, t: Date.now(), ...fields }) + '\n');
const lines = createInterface({ input: process.stdin });
const commands = lines[Symbol.asyncIterator]();
let enqueueDelayMs = config.enqueueDelayMs ?? 0;
lines.on('line', (line) => {
  const pace = /^pace (\d+)$/.exec(line.trim());
  if (pace) enqueueDelayMs = Number(pace[1]);
});
const pause = (ms) => (ms > 0 ? new Promise((resolve) => setTimeout(resolve, ms)) : undefined);
const nextCommand = async () => {
  const { value, done } = await commands.next();
  return done ? null : value.trim();
};
// Waits for the line `word` on stdin: true once it came, false if stdin closed first (the driver
// is gone; without this check the loop would spin on the closed stream for the process's life).
const commanded = async (word) => {
  for (;;) {
    const line = await nextCommand();
    if (line === word) return true;
    if (line === null) return false;
  }
};

// withoutEngine: the client alone (the liveness suite restarts PostgreSQL, which the engine's
// processes do not survive: an unhandled 'error' on its LISTEN connection ends them; the recovery
// benchmark's "client alone" scenarios leave out the engine's queue, which here only waits for an
// executor that never listens, trying two loopback connections every 50 ms).
const world = config.withoutEngine
  ? null
  : createWorld({ connectionString: config.dbUrl, jobPrefix: 'workflow_', queueConcurrency: 1, maxPoolSize: 2 });
if (world) await startWorldWithoutRecovery(world);
const pool = config.mode === 'rollcall' ? new pg.Pool({ connectionString: config.dbUrl, max: 2 }) : null;
// An idle connection the database drops (a restart) is discarded by the pool; without a listener
// its 'error' event would end the process.
pool?.on('error', (error) => out('pool-error', { message: error.message }));
if (pool) await (await pool.connect()).release();

if (config.waitForGo) {
  out('ready');
  if (!(await commanded('go'))) process.exit(1);
}

const started = performance.now();
// This process's CPU from "go" on (its start-up, loading the engine and the client, is not in it).
const cpuAtStart = process.cpuUsage();
const cpuMs = () => {
  const used = process.cpuUsage(cpuAtStart);
  return Math.round((used.user + used.system) / 1000);
};
if (config.mode === 'engine') {
  const log = console.log;
  console.log = () => {}; // "Re-enqueued N active run(s) on startup"
  await reenqueueActiveRuns(world.runs, world.queue, 'world-postgres');
  console.log = log;
  out('result', { elapsedMs: performance.now() - started, cpuMs: cpuMs() });
  // The engine leaves a handle open after close() (its executor wait loop); do not wait for it.
  await world.close().catch(() => {});
  process.exit(0);
}

if (config.mode === 'bystander') {
  await commanded('leave');
  out('result', { elapsedMs: performance.now() - started, cpuMs: cpuMs() });
  await world?.close().catch(() => {});
  process.exit(0);
}

// The built-in enqueuer (one add_jobs round trip per batch), reporting what each batch held: the
// moment a takeover batch reaches its new owner is what the dead-owner benchmark times.
const builtIn = graphileEnqueuer({ pool });
const enqueue = async (runs, { batch }) => {
  out('claimed', {
    batchId: batch.id,
    fence: batch.fence,
    epochKind: batch.epochKind,
    runIds: runs.map((r) => r.runId),
    deadInstanceIds: [...new Set(runs.map((r) => r.deadInstanceId).filter(Boolean))],
  });
  await pause(enqueueDelayMs / 2);
  const result = await builtIn(runs);
  await pause(enqueueDelayMs / 2);
  return result;
};

const client = startRecovery({
  url: config.url,
  namespace: config.namespace,
  registrationSecret: config.secret,
  deploymentId: config.deploymentId,
  name: config.name,
  maxRuns: config.maxRuns,
  enqueue,
  // The session lock (on unless the driver says sessionLock: false): a kill is seen in a second.
  // Its session comes from this package's pg, the one the replica's pool uses.
  sessionLock: config.sessionLock === false ? false : () => openSession(pg.Client, config.dbUrl),
  logger: config.verbose ? undefined : false,
});
for (const runId of config.inFlight ?? []) client.tracker.begin(runId);
client.on('registered', (e) => out('registered', { instanceId: e.instanceId }));
client.on('session-lock', (e) => out('session-lock', { instanceId: e.instanceId, state: e.state, reason: e.reason, pid: e.pid }));
client.on('batch', (b) => out('batch', { batchId: b.batchId, fence: b.fence, runs: b.runs, epochKind: b.epochKind }));
client.on('complete-refused', (b) => out('complete-refused', { batchId: b.batchId, status: b.status }));

const outcome = await client.recovered;
// When this replica learnt that its deploy's pass is over (the benchmark compares it with the
// moment the epoch closed).
out('done', { epochId: outcome.epochId });
const elapsedMs = performance.now() - started;
const result = { outcome: { status: outcome.status, mode: outcome.mode, epochId: outcome.epochId }, stats: client.stats, elapsedMs, cpuMs: cpuMs() };
if (config.stayAlive) {
  out('recovered', result);
  // Heartbeating in the background until told to leave (or killed); a driver that is gone
  // counts as told.
  await commanded('leave');
}
await client.stop();
await pool.end();
out('result', result);
await world?.close().catch(() => {});
process.exit(0);
