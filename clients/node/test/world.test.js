// The zero-code wiring (@rollcall/client/world) against the REAL service (packaged jar, embedded
// PostgreSQL) and the REAL engine on both lines: world-postgres 4.3.7 loaded the way the 4.x
// runtime loads a world (require, synchronous createWorld), and 5.0.0-beta.27 and beta.29 loaded
// the way the 5.0 line does (import, awaited createWorld), each with the graphile-worker 0.16.6 it pins
// (world-graphile.test.js: 0.18.0). Each application is a separate process configured by
// environment variables alone; its graphile runner delivers the jobs Rollcall's boot recovery
// enqueued to its tracked queue handlers. Requests between the application and the service go
// through a recording proxy on loopback (support/world-line.js).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { jobs, seedRuns } from './support/db.js';
import { installBeta27App, installBetaApp, STABLE_APP_DIR } from './support/engines.js';
import { spawnNode } from './support/processes.js';
import { freePort, NAMESPACE, SECRET } from './support/service.js';
import { withService } from './support/suite.js';
import { recordingProxy, until, WORLD_APP, WORLD_MODULE, zeroCodeLineTest } from './support/world-line.js';

let service;
let db;
// The production lease (10 s): on a loaded machine the tests' usual 2 s lease can lapse and the
// client rightly registers again, which would blur "one registration per process".
withService(
  (s, d) => {
    service = s;
    db = d;
  },
  { ROLLCALL_LEASE_TTL: '10s' },
);

const LINES = [
  { engine: '4.3.7', loader: 'require', appDir: async () => STABLE_APP_DIR, target: '@rollcall/client/world', queueWorkers: 5 },
  { engine: '5.0.0-beta.27', loader: 'import', appDir: installBeta27App, target: WORLD_MODULE, queueWorkers: 5 },
  { engine: '5.0.0-beta.29', loader: 'import', appDir: installBetaApp, target: WORLD_MODULE, queueWorkers: 5 },
];

describe('the zero-code world module', { timeout: 600_000 }, () => {
  for (const [index, line] of LINES.entries()) {
    zeroCodeLineTest(line, index, () => ({ service, db }));
  }

  test("world.close(), for an application that manages its own shutdown: the queue closes after its running jobs, then the process leaves", async () => {
    const runs = await seedRuns(db, { active: 2, firstId: 9000 });
    const proxy = await recordingProxy(service.url);
    const port = await freePort();
    const app = spawnNode(WORLD_APP, {
      cwd: STABLE_APP_DIR,
      timeoutMs: 120_000,
      env: {
        WORKFLOW_LOADER: 'require',
        WORKFLOW_TARGET_WORLD: '@rollcall/client/world',
        WORKFLOW_POSTGRES_URL: service.dbUrl,
        WORKFLOW_LOCAL_BASE_URL: `http://127.0.0.1:${port}`,
        PORT: String(port),
        ROLLCALL_URL: proxy.url,
        ROLLCALL_NAMESPACE: NAMESPACE,
        ROLLCALL_SECRET: SECRET,
        ROLLCALL_DEPLOYMENT_ID: 'deploy-world-close',
        ROLLCALL_LOG_LEVEL: 'warn',
      },
    });
    try {
      await until('both runs executing', () => app.events.filter((e) => e.event === 'executing').length === runs.length);
      // Only the first world started; the second (the queue handlers') never did, and stays open.
      app.send('close');
      const { code, events } = await app.exited;
      assert.equal(code, 0, 'nothing keeps the process alive: heartbeats stopped, pool closed');
      assert.equal(events.filter((e) => e.event === 'finished').length, runs.length, 'running executions finished');
      const closedAt = events.find((e) => e.event === 'world-closed').t;
      const leaves = proxy.records.filter((r) => r.method === 'DELETE');
      assert.equal(leaves.length, 1, 'left once the started world closed');
      assert.equal(leaves[0].status, 204);
      assert.deepEqual(leaves[0].body, { inFlight: [] }, 'with nothing in flight: every execution ended before');
      assert.ok(leaves[0].at <= closedAt + 50, 'the leave is part of closing the started world');
      assert.equal((await jobs(db)).length, 0, 'graphile completed (deleted) both jobs before the leave');
    } finally {
      app.kill('SIGKILL');
      await proxy.close();
    }
  });

  test('a missing or bad setting stops the application at createWorld, naming the variable', async () => {
    const app = spawnNode(WORLD_APP, {
      cwd: STABLE_APP_DIR,
      env: {
        WORKFLOW_LOADER: 'require',
        WORKFLOW_TARGET_WORLD: '@rollcall/client/world',
        WORKFLOW_POSTGRES_URL: service.dbUrl,
        ROLLCALL_URL: 'rollcall:8080',
        ROLLCALL_NAMESPACE: NAMESPACE,
        ROLLCALL_SECRET: '',
        ROLLCALL_DEPLOYMENT_ID: 'd',
        ROLLCALL_FALLBACK: 'maybe',
      },
    });
    const { code, events } = await app.exited;
    assert.equal(code, 3);
    const failure = events.find((e) => e.event === 'create-failed');
    assert.match(failure.message, /ROLLCALL_URL is not an http\(s\) URL/);
    assert.match(failure.message, /ROLLCALL_SECRET is not set/);
    assert.match(failure.message, /ROLLCALL_FALLBACK is 'skip' or 'local'/);
    assert.doesNotMatch(failure.message, /ROLLCALL_NAMESPACE|ROLLCALL_DEPLOYMENT_ID|WORKFLOW_POSTGRES_URL/);
  });
});
