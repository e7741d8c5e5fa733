// One application replica for the multi-process tests and the benchmark: registers with Rollcall,
// takes part in the deploy's boot recovery with the built-in graphile enqueuer, reports every
// event as a JSON line on stdout, and leaves. Configured by the JSON in ROLLCALL_CLIENT_CONFIG:
//   url, dbUrl, namespace, secret, deploymentId, name, maxRuns,
//   holdAfterEnqueueMs  after enqueuing its FIRST batch, hold the lease this long before completing
//   waitForGo           wait for a line "go" on stdin before starting (benchmark timing)
//   inFlight            run ids this replica reports as executing (tracker.begin) for its lifetime
//   stayAlive           after recovery, keep running (heartbeating) until killed
//   sessionLock         hold the session lock (the client's own session from dbUrl)
import { createInterface } from 'node:readline';
import pg from 'pg';
import { graphileEnqueuer, startRecovery } from '../../src/index.js';

const config = JSON.parse(process.env.ROLLCALL_CLIENT_CONFIG);
const out = (event, fields) => process.stdout.write(JSON.stringify({ event, t: Date.now(), ...fields }) + '\n');

const pool = new pg.Pool({ connectionString: config.dbUrl, max: 2 });
await (await pool.connect()).release();
const builtIn = graphileEnqueuer({ pool });

let held = false;
const enqueue = async (runs, { batch }) => {
  const result = await builtIn(runs);
  if (config.holdAfterEnqueueMs && !held) {
    held = true;
    out('holding', { batchId: batch.id, fence: batch.fence, runIds: runs.map((r) => r.runId) });
    await new Promise((r) => setTimeout(r, config.holdAfterEnqueueMs));
  }
  return result;
};

if (config.waitForGo) {
  out('ready', {});
  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) if (line.trim() === 'go') break;
  process.stdin.destroy(); // an open stdin would keep this process alive after it is done
}

const started = performance.now();
const client = startRecovery({
  url: config.url,
  namespace: config.namespace,
  registrationSecret: config.secret,
  deploymentId: config.deploymentId,
  name: config.name,
  maxRuns: config.maxRuns,
  enqueue,
  connectionString: config.sessionLock ? config.dbUrl : undefined,
  logger: config.verbose ? undefined : false,
});
for (const runId of config.inFlight ?? []) client.tracker.begin(runId);
const batches = [];
client.on('registered', (e) => out('registered', { instanceId: e.instanceId }));
client.on('batch', (b) => {
  batches.push({ batchId: b.batchId, fence: b.fence, runs: b.runs, epochKind: b.epochKind });
  out('batch', b);
});
client.on('complete-refused', (b) => out('complete-refused', { batchId: b.batchId, status: b.status }));

const outcome = await client.recovered;
const elapsedMs = performance.now() - started;
if (config.stayAlive) {
  out('recovered', { outcome, stats: client.stats });
  await new Promise(() => setInterval(() => {}, 60_000));
}
await client.stop();
await pool.end();
out('result', { outcome: { status: outcome.status, mode: outcome.mode, epochId: outcome.epochId }, stats: client.stats, batches, elapsedMs });
