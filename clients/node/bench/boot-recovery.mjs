// Boot recovery of one deploy, Rollcall against the engine's own, on the same machine:
// 10 000 active runs (half pending, half running), 1, 4 and 16 replica processes.
//
//   npm run bench                 (after `./mvnw -B package -DskipTests` in the repository root)
//   BENCH_RUNS=20000 BENCH_REPLICAS=2,8 BENCH_BATCH=500 npm run bench
//
// For each replica count the database is seeded afresh, the replicas start and get ready (node
// loaded, database connected), then all are told "go" at once; wall time runs from "go" until the
// last replica has finished. Jobs per active run counts the workflow jobs in graphile-worker
// afterwards. Rollcall replicas use the built-in enqueuer (one add_jobs round trip per batch) and
// real service timings (lease 10 s, heartbeat 3 s, batch lease 30 s); a new deployment id per
// round opens a new boot epoch.
import { fileURLToPath } from 'node:url';
import { jobs, pool as makePool, seedRuns } from '../test/support/db.js';
import { killAll, spawnClient, spawnNode } from '../test/support/processes.js';
import { freePort, NAMESPACE, SECRET, setUpEngineSchemas, startService, waitReady } from '../test/support/service.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 10_000);
const REPLICAS = (process.env.BENCH_REPLICAS ?? '1,4,16').split(',').map(Number);
const BATCH = Number(process.env.BENCH_BATCH ?? 500);
const ENGINE = fileURLToPath(new URL('./engine-process.mjs', import.meta.url));

const service = await startService({
  env: { ROLLCALL_LEASE_TTL: '10s', ROLLCALL_HEARTBEAT_INTERVAL: '3s', ROLLCALL_BATCH_LEASE: '30s' },
});
const db = makePool(service.dbUrl);
const rows = [];
try {
  await setUpEngineSchemas(service.dbUrl);
  await waitReady(service);
  const closedPort = await freePort();

  for (const n of REPLICAS) {
    // Rollcall
    await seedRuns(db, { active: RUNS });
    const deploymentId = `bench-${n}-${Date.now()}`; // one rollout: the same for all its replicas
    const replicas = Array.from({ length: n }, (_, i) =>
      spawnClient(
        {
          url: service.url,
          dbUrl: service.dbUrl,
          namespace: NAMESPACE,
          secret: SECRET,
          deploymentId,
          name: `replica-${i + 1}`,
          maxRuns: BATCH,
          waitForGo: true,
        },
        { timeoutMs: 600_000 },
      ),
    );
    const rollcall = await round(replicas);
    const rollcallJobs = await flowJobs();
    const claims = rollcall.results.reduce((s, r) => s + r.stats.claims, 0);
    const batches = rollcall.results.reduce((s, r) => s + r.stats.batches, 0);

    // The engine's own recovery
    await seedRuns(db, { active: RUNS });
    const engines = Array.from({ length: n }, () =>
      spawnNode(ENGINE, {
        env: { ROLLCALL_ENGINE_CONFIG: JSON.stringify({ dbUrl: service.dbUrl }), WORKFLOW_LOCAL_BASE_URL: `http://127.0.0.1:${closedPort}` },
        timeoutMs: 600_000,
      }),
    );
    const engine = await round(engines);
    const engineJobs = await flowJobs();

    rows.push({ n, rollcall: rollcall.wallMs, rollcallJobs, batches, claims, engine: engine.wallMs, engineJobs });
    process.stderr.write(`replicas=${n}: rollcall ${fmt(rollcall.wallMs)} s, engine ${fmt(engine.wallMs)} s\n`);
  }
} finally {
  killAll();
  await db.end();
  await service.stop();
}

console.log(`\nBoot recovery of ${RUNS.toLocaleString('en')} active runs (batches of ${BATCH}), wall time from "go" to the last replica done:\n`);
console.log('| replicas | Rollcall wall time | Rollcall jobs per active run | batches / claims | engine start() recovery wall time | engine jobs per active run |');
console.log('|---|---|---|---|---|---|');
for (const r of rows) {
  console.log(
    `| ${r.n} | ${fmt(r.rollcall)} s | ${(r.rollcallJobs / RUNS).toFixed(2)} | ${r.batches} / ${r.claims} | ${fmt(r.engine)} s | ${(r.engineJobs / RUNS).toFixed(2)} |`,
  );
}

async function round(procs) {
  await Promise.all(procs.map((p) => p.waitFor('ready', 120_000)));
  const t0 = performance.now();
  for (const p of procs) p.send('go');
  const exits = await Promise.all(procs.map((p) => p.exited));
  const wallMs = performance.now() - t0;
  const results = exits.map(({ code, events, stderr }) => {
    const result = events.find((e) => e.event === 'result');
    if (code !== 0 || !result) throw new Error(`a replica failed (exit ${code}):\n${stderr.slice(-3000)}`);
    return result;
  });
  return { wallMs, results };
}

async function flowJobs() {
  return (await jobs(db)).filter((j) => j.task === 'workflow_flows').length;
}

function fmt(ms) {
  return (ms / 1000).toFixed(2);
}
