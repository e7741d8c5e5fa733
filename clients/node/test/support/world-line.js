// One engine line through the zero-code wiring (@rollcall/client/world), against the real service
// and the real engine: the test world.test.js runs for each line it covers, and
// world-graphile.test.js for graphile-worker's newest release. Requests between the application
// and the service go through a recording proxy on loopback, so the test sees exactly what the
// client sent and what the service answered.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { jobs, seedRuns } from './db.js';
import { graphileWorkerVersion, worldPostgresVersion } from './engines.js';
import { spawnNode } from './processes.js';
import { freePort, NAMESPACE, SECRET } from './service.js';

export const WORLD_APP = fileURLToPath(new URL('./world-app.mjs', import.meta.url));
export const WORLD_MODULE = fileURLToPath(new URL('../../src/rollcall-world.js', import.meta.url));

/** Forwards every request to `target` and records {method, path, body, status, answer}. */
export async function recordingProxy(target) {
  const records = [];
  const server = createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const text = Buffer.concat(chunks).toString('utf8');
    const record = { method: req.method, path: req.url, body: text ? JSON.parse(text) : null, at: Date.now() };
    try {
      const headers = { ...req.headers };
      delete headers.host;
      delete headers['content-length'];
      const answer = await fetch(target + req.url, { method: req.method, headers, body: text || undefined });
      const body = await answer.text();
      record.status = answer.status;
      record.answer = body ? JSON.parse(body) : null;
      records.push(record);
      res.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'application/json' }).end(body);
    } catch (error) {
      record.status = 0;
      records.push(record);
      res.destroy(error);
    }
  });
  const port = await freePort();
  await new Promise((ok) => server.listen(port, '127.0.0.1', ok));
  return { url: `http://127.0.0.1:${port}`, records, close: () => new Promise((ok) => server.close(ok)) };
}

export async function until(what, check, ms = 60_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export const sortEntries = (entries) => [...entries].sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));

/**
 * The test of one engine line: `line` is {engine, graphile?, loader, appDir(), target,
 * queueWorkers}; `index` keeps each line's seeded run ids apart; `context()` gives {service, db}
 * once the file's service is up. The application registers once, claims its boot batch, enqueues
 * keyed jobs, names its queue workers, heartbeats message ids, leaves and exits on SIGTERM, and the
 * service then releases its jobs' locks.
 */
export function zeroCodeLineTest(line, index, context) {
  return test(`world-postgres ${line.engine}${line.graphile ? ` with graphile-worker ${line.graphile}` : ''} (${line.loader}): registers once, claims its boot batch, enqueues keyed jobs, heartbeats message ids, leaves and exits on SIGTERM, its locks released once it is gone`, async () => {
    const { service, db } = context();
    const appDir = await line.appDir();
    assert.equal(worldPostgresVersion(appDir), line.engine, 'the application resolves the engine line under test');
    assert.equal(graphileWorkerVersion(appDir), line.graphile ?? '0.16.6', 'and the queue under test');
    const runs = await seedRuns(db, { active: 3, firstId: 1000 * (index + 1) });
    const proxy = await recordingProxy(service.url);
    const port = await freePort();
    const deploymentId = `deploy-world-${line.engine}-${line.graphile ?? line.loader}`;
    const app = spawnNode(WORLD_APP, {
      cwd: appDir,
      timeoutMs: 180_000,
      env: {
        WORKFLOW_LOADER: line.loader,
        WORKFLOW_TARGET_WORLD: line.target,
        WORKFLOW_POSTGRES_URL: service.dbUrl,
        WORKFLOW_POSTGRES_WORKER_CONCURRENCY: '5',
        WORKFLOW_LOCAL_BASE_URL: `http://127.0.0.1:${port}`,
        PORT: String(port),
        ROLLCALL_URL: proxy.url,
        ROLLCALL_NAMESPACE: NAMESPACE,
        ROLLCALL_SECRET: SECRET,
        ROLLCALL_DEPLOYMENT_ID: deploymentId,
        ROLLCALL_NAME: `world-app-${line.loader}`,
        ROLLCALL_LOG_LEVEL: 'warn',
      },
    });
    try {
      // Boot recovery through the real runner: every seeded run is delivered to a tracked handler.
      const executing = await until('every run executing', () => {
        const seen = app.events.filter((e) => e.event === 'executing');
        return seen.length >= runs.length && seen;
      });
      assert.deepEqual(executing.map((e) => e.runId).sort(), runs.map((r) => r.runId).sort(), 'each run once');

      // Registered once, although the application created the world twice.
      const registrations = proxy.records.filter((r) => r.method === 'POST' && r.path === '/instances');
      assert.equal(registrations.length, 1, `one client per process: ${JSON.stringify(registrations)}`);
      assert.equal(registrations[0].status, 201);
      assert.equal(registrations[0].body.deploymentId, deploymentId);
      assert.equal(registrations[0].body.name, `world-app-${line.loader}`);
      assert.equal(registrations[0].body.namespace, NAMESPACE);
      const { instanceId } = registrations[0].answer;
      assert.ok(proxy.records.some((r) => r.path === '/recovery/claim' && r.answer?.status === 'batch'), 'claimed a batch');

      // The jobs: exactly one per run (the engine's own re-enqueue did not run), keyed by the
      // message id the handler was delivered with, and locked by this process's worker.
      const queued = await jobs(db);
      assert.equal(queued.length, runs.length, `one job per run, got ${queued.length}`);
      for (const job of queued) {
        assert.equal(job.task, 'workflow_flows');
        assert.match(job.key, /^msg_[0-9A-HJKMNP-TV-Z]{26}$/);
        assert.equal(job.key, job.payload.messageId, 'keyed by its fresh message id');
        assert.ok(job.locked_by, 'locked by a worker of the application');
        const execution = executing.find((e) => e.runId === job.runId);
        assert.equal(execution.messageId, job.key, 'the handler saw the message id of the job it runs');
      }
      const expected = sortEntries(queued.map((j) => ({ runId: j.runId, messageId: j.key })));

      // Every graphile worker id of the process is named to the service, at registration or in
      // an answered heartbeat, and every job is locked by one of them: a death releases all its
      // locks at once. graphile-worker 0.16 gives each unit of concurrency (5 here) an id of its
      // own; from 0.17 the pool locks every job by the pool's one id.
      const beatPath = `/instances/${encodeURIComponent(instanceId)}/heartbeat`;
      const named = await until(`the ${line.queueWorkers} queue worker ids named`, () => {
        const ids = new Set([
          ...(registrations[0].body.workerIds ?? []),
          ...proxy.records.filter((r) => r.path === beatPath && r.status === 200).flatMap((r) => r.body?.workerIds ?? []),
        ]);
        return ids.size >= line.queueWorkers && ids;
      });
      assert.equal(named.size, line.queueWorkers, `the ids that lock jobs: ${[...named]}`);
      for (const job of queued) assert.ok(named.has(job.locked_by), `job locked by ${job.locked_by}, a named worker`);
      const stored = await db.query('SELECT worker_ids FROM rollcall.instances WHERE id = $1', [instanceId]);
      assert.deepEqual([...stored.rows[0].worker_ids].sort(), [...named].sort(), 'the service keeps them');

      // Heartbeats carry the executions with their message ids, and the service accepts them.
      const beat = await until('a heartbeat with the three executions', () =>
        proxy.records.find(
          (r) =>
            r.path === `/instances/${encodeURIComponent(instanceId)}/heartbeat` &&
            r.body?.inFlight?.length === runs.length &&
            JSON.stringify(sortEntries(r.body.inFlight)) === JSON.stringify(expected),
        ),
      );
      assert.equal(beat.status, 200, JSON.stringify(beat.answer));

      // SIGTERM: it leaves with its in-flight set and exits at once, without waiting for the
      // executions it holds (a peer takes them over once the service released its locks).
      const signalledAt = Date.now();
      app.kill('SIGTERM');
      const { code, signal } = await app.exited;
      const exitMs = Date.now() - signalledAt;
      assert.equal(code, 143, `exit code of SIGTERM, got ${code ?? signal}`);
      assert.ok(exitMs < 5_000, `exited ${exitMs} ms after SIGTERM`);
      const leaves = proxy.records.filter((r) => r.method === 'DELETE');
      assert.equal(leaves.length, 1);
      assert.equal(leaves[0].path, `/instances/${encodeURIComponent(instanceId)}`);
      assert.equal(leaves[0].status, 204);
      assert.deepEqual(sortEntries(leaves[0].body.inFlight), expected, 'left with every execution and its message id');
      assert.equal(leaves[0].body.exiting, true, 'an exiting leave: the locks go only once the process is gone');
      assert.ok(leaves[0].at >= signalledAt);
      assert.equal(app.events.filter((e) => e.event === 'finished').length, 0, 'no execution went on to finish');
      assert.ok(
        proxy.records.every((r) => r.at <= leaves[0].at),
        'nothing was sent to the service after the leave',
      );

      // Once the process is gone, the service releases the locks its named workers held: the
      // jobs are free for a peer at once, not after graphile-worker's 4 h lock expiry.
      const jobIds = new Set(queued.map((j) => j.id));
      await until('the jobs unlocked by the service', async () =>
        (await jobs(db)).filter((j) => jobIds.has(j.id)).every((j) => j.locked_by === null),
      );
    } finally {
      app.kill('SIGKILL');
      await proxy.close();
    }
  });
}
