// The client's behaviour at the edges the real service rarely shows on demand (an outage at boot,
// 503s, refusals, a 410 on a heartbeat), against a scripted stand-in of the HTTP API on loopback.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { after, test } from 'node:test';
import { QueueWorkers, RollcallError, createTracker, startRecovery } from '../src/index.js';
import { freePort } from './support/service.js';

const servers = [];
after(() => Promise.all(servers.map((s) => new Promise((r) => s.close(r)))));

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * A stand-in Rollcall. `script` answers by operation name (register, claim, complete, heartbeat,
 * leave) with {status, body, headers?}; every request is recorded.
 */
async function fakeRollcall(script) {
  const requests = [];
  let instances = 0;
  const defaults = {
    register: () => ({
      status: 201,
      body: {
        instanceId: `00000000-0000-0000-0000-00000000000${++instances}`,
        token: `rci_${instances}`,
        leaseExpiresAt: new Date(Date.now() + 2000).toISOString(),
        leaseTtlMs: 2000,
        heartbeatIntervalMs: 100,
      },
    }),
    claim: () => ({ status: 200, body: { status: 'done', epochId: 1 } }),
    complete: (req) => ({
      status: 200,
      body: { batchId: 1, state: 'completed', enqueued: 0, failed: req.body.failedRunIds?.length ?? 0, retried: 0, alreadyCompleted: false },
    }),
    heartbeat: () => ({ status: 200, body: { leaseExpiresAt: new Date().toISOString(), recoveryPending: false } }),
    leave: () => ({ status: 204 }),
  };
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', async () => {
      const op =
        req.method === 'POST' && req.url === '/instances' ? 'register'
        : req.url === '/recovery/claim' ? 'claim'
        : /\/complete$/.test(req.url) ? 'complete'
        : /\/heartbeat$/.test(req.url) ? 'heartbeat'
        : req.method === 'DELETE' ? 'leave'
        : 'unknown';
      const record = { op, method: req.method, url: req.url, auth: req.headers.authorization, body: raw ? JSON.parse(raw) : null, at: Date.now() };
      requests.push(record);
      const answer = await (script[op] ?? defaults[op] ?? (() => ({ status: 404 })))(record, requests.filter((r) => r.op === op).length);
      if (answer === 'hang') return; // never answer
      if (answer === 'drop') {
        req.socket.destroy();
        return;
      }
      const problem = answer.status >= 400;
      res.writeHead(answer.status, {
        'content-type': problem ? 'application/problem+json' : 'application/json',
        ...answer.headers,
      });
      res.end(answer.body === undefined ? '' : JSON.stringify(answer.body));
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  servers.push(server);
  return { url: `http://127.0.0.1:${server.address().port}`, requests, of: (op) => requests.filter((r) => r.op === op), defaults };
}

const problem = (status, slug, detail = slug, extensions = {}) => ({
  status,
  body: { type: `urn:rollcall:problem:${slug}`, title: slug, status, detail, ...extensions },
});

/** What the service answers when an instance asks too fast: the exact wait in the body, whole seconds in the header. */
const rateLimited = (retryAfterMs) => ({
  ...problem(429, 'rate-limited', 'slow down', { retryAfterMs }),
  headers: { 'retry-after': String(Math.max(1, Math.ceil(retryAfterMs / 1000))) },
});

const base = (url, extra = {}) => ({
  url,
  namespace: 'app',
  registrationSecret: 's',
  deploymentId: 'd1',
  name: 'test',
  enqueue: async () => ({ failedRunIds: [] }),
  logger: false,
  ...extra,
});

/** Starts a client that is stopped when the test ends, however it ends. */
const startFor = (t, options) => {
  const client = startRecovery(options);
  t.after(() => client.stop());
  return client;
};

const batch = (id, runs, fence = 1) => ({
  status: 200,
  body: {
    status: 'batch',
    batch: {
      id,
      epochId: 1,
      epochKind: 'boot',
      fence,
      leaseExpiresAt: new Date(Date.now() + 3000).toISOString(),
      runs: runs.map((runId) => ({ runId, workflowName: 'wf', queueName: '__wkf_workflow_wf', reason: 'pending' })),
    },
  },
});

test('options are checked at once', () => {
  assert.throws(() => startRecovery({}), /url is required/);
  assert.throws(() => startRecovery({ ...base('http://127.0.0.1:1'), pool: {} }), /exactly one of enqueue/);
  assert.throws(() => startRecovery({ ...base('http://127.0.0.1:1'), fallback: 'local' }), /localRecovery/);
  assert.throws(() => startRecovery({ ...base('http://127.0.0.1:1'), maxRuns: 6000 }), /maxRuns/);
});

test('registration rides out 503s and dropped connections with growing pauses, then recovers', async () => {
  const fake = await fakeRollcall({
    register: (req, n) => (n === 1 ? problem(503, 'database-unavailable') : n === 2 ? 'drop' : fakeDefaults(fake).register()),
  });
  const client = startRecovery(base(fake.url));
  const outcome = await client.recovered;
  await client.stop();
  assert.deepEqual(outcome, { status: 'done', epochId: 1 });
  const at = fake.of('register').map((r) => r.at);
  assert.equal(at.length, 3);
  assert.ok(at[1] - at[0] >= 100, 'paused before the second try');
  assert.ok(at[2] - at[1] >= 200, 'and longer before the third');
  assert.deepEqual(fake.of('register')[0].body, { namespace: 'app', deploymentId: 'd1', name: 'test' });
  assert.equal(fake.of('register')[0].auth, 'Bearer s');
});

function fakeDefaults(fake) {
  return fake.defaults;
}

test('a refused registration is a typed error and is not retried', async () => {
  const fake = await fakeRollcall({ register: () => problem(401, 'unauthorized', 'wrong registration secret') });
  const failed = [];
  const client = startRecovery(base(fake.url));
  client.on('failed', (e) => failed.push(e));
  const outcome = await client.recovered;
  assert.equal(outcome.status, 'failed');
  assert.ok(outcome.error instanceof RollcallError);
  assert.equal(outcome.error.type, 'urn:rollcall:problem:unauthorized');
  assert.equal(outcome.error.status, 401);
  assert.equal(outcome.error.detail, 'wrong registration secret');
  assert.equal(failed.length, 1);
  await sleep(300);
  assert.equal(fake.of('register').length, 1);
  assert.equal(client.state, 'failed');
  await client.stop();
});

test("fallback 'local': the service stays unreachable past the deadline, local recovery runs once, nothing else", async () => {
  const url = `http://127.0.0.1:${await freePort()}`; // nobody listens
  let local = 0;
  const fallbacks = [];
  const client = startRecovery(base(url, { registerDeadlineMs: 700, fallback: 'local', localRecovery: async () => local++ }));
  client.on('fallback', (e) => fallbacks.push(e));
  const started = Date.now();
  const outcome = await client.recovered;
  assert.deepEqual(outcome, { status: 'fallback', mode: 'local' });
  assert.ok(Date.now() - started >= 300, 'it tried for a while first');
  assert.equal(local, 1);
  assert.equal(fallbacks.length, 1);
  assert.equal(fallbacks[0].error.type, 'urn:rollcall:client:unreachable');
  assert.equal(client.stats.fallbacks, 1);
  await sleep(500);
  assert.equal(client.state, 'fallback', 'never joins shared recovery after running its own');
  await client.stop();
});

test("fallback 'skip': nothing runs at the deadline; it joins once the service is back", async () => {
  let up = false;
  const fake = await fakeRollcall({ register: () => (up ? fakeDefaults(fake).register() : problem(503, 'database-unavailable')) });
  const events = [];
  let local = 0;
  const client = startRecovery(base(fake.url, { registerDeadlineMs: 400, localRecovery: async () => local++ }));
  client.on('fallback', (e) => events.push(['fallback', e.mode]));
  client.on('registered', () => events.push(['registered']));
  client.on('done', () => events.push(['done']));
  assert.deepEqual(await client.recovered, { status: 'fallback', mode: 'skip' });
  up = true;
  for (let i = 0; i < 100 && !events.some(([e]) => e === 'done'); i++) await sleep(50);
  await client.stop();
  assert.deepEqual(events, [['fallback', 'skip'], ['registered'], ['done']]);
  assert.equal(local, 0);
});

test('claims until done: enqueues each batch, reports failed runs with the fence, honours wait', async () => {
  // Claims 2 and 5 are sent ahead, while a batch is enqueued; 3 is held and answers wait.
  const fake = await fakeRollcall({
    claim: (req, n) =>
      n === 1 ? batch(7, ['r1', 'r2', 'r3'], 2)
      : n === 2 ? { status: 200, body: { status: 'wait', retryAfterMs: 900 } }
      : n === 3 ? { status: 200, body: { status: 'wait', retryAfterMs: 300 } }
      : n === 4 ? batch(8, ['r4'])
      : { status: 200, body: { status: 'done', epochId: 1 } },
  });
  const seen = [];
  let firstEnqueued;
  const client = startRecovery(
    base(fake.url, {
      maxRuns: 50,
      enqueue: async (runs) => {
        seen.push(runs.map((r) => r.runId));
        if (runs.length === 1) throw new Error('queue down');
        await sleep(100);
        firstEnqueued = Date.now();
        return { failedRunIds: ['r2', 'not-in-batch'] };
      },
    }),
  );
  assert.equal((await client.recovered).status, 'done');
  await client.stop();
  assert.deepEqual(seen, [['r1', 'r2', 'r3'], ['r4']]);
  const claims = fake.of('claim');
  assert.deepEqual(claims[0].body, { maxRuns: 50, waitMs: 20_000 });
  assert.deepEqual(claims[1].body, { maxRuns: 50 }, 'the claim sent ahead is not held');
  assert.ok(claims[1].at < firstEnqueued, 'sent while the batch before it was enqueued');
  assert.ok(claims[2].at - claims[1].at < 600, "a wait answering the claim sent ahead is not slept: the next claim is held");
  assert.deepEqual(claims[2].body, { maxRuns: 50, waitMs: 20_000 });
  assert.ok(claims[3].at - claims[2].at >= 280, 'slept retryAfterMs');
  const completes = fake.of('complete');
  assert.equal(completes[0].url, '/recovery/batches/7/complete');
  assert.deepEqual(completes[0].body, { fence: 2, failedRunIds: ['r2'] });
  assert.deepEqual(completes[1].body, { fence: 1, failedRunIds: ['r4'] }, 'a throwing enqueue fails the whole batch');
  assert.deepEqual(
    { batches: client.stats.batches, runsEnqueued: client.stats.runsEnqueued, runFailures: client.stats.runFailures, waits: client.stats.waits, claims: client.stats.claims },
    { batches: 2, runsEnqueued: 2, runFailures: 2, waits: 1, claims: 5 },
  );
});

test("a batch's complete is on its way while the next batch is enqueued, one complete at a time", async () => {
  const fake = await fakeRollcall({
    claim: (req, n) => (n <= 3 ? batch(10 + n, [`r${n}`]) : { status: 200, body: { status: 'done', epochId: 1 } }),
    complete: async (req) => {
      await sleep(300);
      return fake.defaults.complete(req);
    },
  });
  const enqueues = [];
  const client = startRecovery(
    base(fake.url, {
      enqueue: async (runs) => {
        enqueues.push({ run: runs[0].runId, at: Date.now() });
        await sleep(50);
        return {};
      },
    }),
  );
  assert.equal((await client.recovered).status, 'done');
  await client.stop();
  const completes = fake.of('complete');
  assert.deepEqual(
    completes.map((c) => c.url),
    ['/recovery/batches/11/complete', '/recovery/batches/12/complete', '/recovery/batches/13/complete'],
  );
  assert.deepEqual(enqueues.map((e) => e.run), ['r1', 'r2', 'r3']);
  // Batch 12 was enqueued while batch 11's complete (300 ms) was still on its way.
  assert.ok(enqueues[1].at < completes[0].at + 300, 'the next batch did not wait for the complete');
  // Batch 13's enqueue ended only after it; its complete waited for batch 12's to end.
  assert.ok(completes[2].at - completes[1].at >= 290, 'one complete on its way at a time');
  assert.equal(client.stats.batches, 3);
});

test('a claim answered 5xx is retried with backoff; a stale-fence complete is reported, not fatal', async () => {
  const fake = await fakeRollcall({
    claim: (req, n) => (n <= 2 ? problem(503, 'source-unavailable') : n === 3 ? batch(3, ['a']) : fakeDefaults(fake).claim()),
    complete: () => problem(409, 'stale-fence'),
  });
  const refused = [];
  const client = startRecovery(base(fake.url));
  client.on('complete-refused', (e) => refused.push(e));
  assert.equal((await client.recovered).status, 'done');
  await client.stop();
  assert.equal(refused.length, 1);
  assert.equal(refused[0].status, 409);
  assert.equal(refused[0].type, 'urn:rollcall:problem:stale-fence');
  assert.equal(client.stats.fencedEvents, 0);
  assert.equal(fake.of('register').length, 1);
});

test('heartbeats carry the in-flight set; recoveryPending makes it claim again', async () => {
  let pending = false;
  const fake = await fakeRollcall({
    heartbeat: () => ({ status: 200, body: { leaseExpiresAt: new Date().toISOString(), recoveryPending: pending } }),
  });
  const client = startRecovery(base(fake.url));
  client.tracker.begin('wrun_busy');
  assert.equal((await client.recovered).status, 'done');
  const first = fake.of('heartbeat')[0];
  assert.deepEqual(first.body, { inFlight: ['wrun_busy'] });
  assert.ok(first.at <= fake.of('claim')[0].at, 'the in-flight set is published before the first claim');
  assert.equal(first.url, '/instances/00000000-0000-0000-0000-000000000001/heartbeat');
  assert.equal(first.auth, 'Bearer rci_1');
  const claimsBefore = fake.of('claim').length;
  pending = true;
  await sleep(350);
  pending = false;
  assert.ok(fake.of('claim').length > claimsBefore, 'claimed again');
  assert.ok(client.stats.leaseRenewals >= 2);
  client.tracker.end('wrun_busy');
  await sleep(150);
  assert.deepEqual(fake.of('heartbeat').at(-1).body, { inFlight: [] });
  await client.stop();
});

test('in-flight entries carry message ids: objects where the id is known, run ids otherwise, in the registration, heartbeats and the leave', async () => {
  const fake = await fakeRollcall({});
  const tracker = createTracker();
  tracker.begin('wrun_replay', 'msg_01A');
  tracker.begin('wrun_replay', 'msg_01B');
  tracker.begin('wrun_plain');
  const client = startRecovery(base(fake.url, { inFlight: tracker }));
  assert.equal((await client.recovered).status, 'done');
  const entries = [{ runId: 'wrun_replay', messageId: 'msg_01A' }, { runId: 'wrun_replay', messageId: 'msg_01B' }, 'wrun_plain'];
  assert.deepEqual(fake.of('register')[0].body.inFlight, entries, 'published with the registration');
  assert.deepEqual(fake.of('heartbeat')[0].body, { inFlight: entries });
  client.tracker.end('wrun_replay', 'msg_01A');
  await client.stop();
  assert.deepEqual(fake.of('leave')[0].body, { inFlight: [{ runId: 'wrun_replay', messageId: 'msg_01B' }, 'wrun_plain'] });
});

test('an inFlight function may return entries of both forms; malformed ones are not sent', async () => {
  const fake = await fakeRollcall({});
  const client = startRecovery({
    ...base(fake.url),
    inFlight: () => ['wrun_a', { runId: 'wrun_b', messageId: 'msg_1' }, { runId: 'wrun_c' }, { messageId: 'msg_2' }, '', 7],
  });
  assert.equal((await client.recovered).status, 'done');
  await client.stop();
  assert.deepEqual(fake.of('leave')[0].body, { inFlight: ['wrun_a', { runId: 'wrun_b', messageId: 'msg_1' }, { runId: 'wrun_c' }] });
});

/** A registration answer with a long lease and a 20 s heartbeat interval. */
const slowBeats = (answer) => ({ ...answer, body: { ...answer.body, leaseTtlMs: 60_000, heartbeatIntervalMs: 20_000 } });

test('recheckAfterMs: it beats again that soon, not a whole interval later, and claims the takeover it reports', async () => {
  const takeover = batch(7, ['wrun_of_the_dead']);
  takeover.body.batch.epochKind = 'takeover';
  const fake = await fakeRollcall({
    register: () => slowBeats(fake.defaults.register()),
    // First beat: a peer is about to die, check again in 150 ms. Second beat: its takeover is open.
    heartbeat: (req, n) => ({
      status: 200,
      body:
        n === 1
          ? { leaseExpiresAt: new Date().toISOString(), recoveryPending: false, recheckAfterMs: 150 }
          : { leaseExpiresAt: new Date().toISOString(), recoveryPending: n === 2 },
    }),
    // This stand-in does not hold idle claims (it answers at once): the takeover comes with the
    // claim that follows the beat saying recoveryPending.
    claim: () =>
      fake.of('heartbeat').length >= 2 && fake.of('claim').length > 1 && !given
        ? ((given = true), takeover)
        : { status: 200, body: { status: 'done', epochId: 1 } },
  });
  let given = false;
  const enqueued = [];
  const client = startRecovery(base(fake.url, { enqueue: async (runs) => enqueued.push(...runs.map((r) => r.runId)) }));
  client.tracker.begin('wrun_mine');
  await client.recovered;
  await sleep(600);
  const beats = fake.of('heartbeat');
  assert.equal(beats.length, 2, 'one early beat, then nothing until the 20 s interval');
  const gap = beats[1].at - beats[0].at;
  assert.ok(gap >= 140 && gap < 500, `the second beat came ${gap} ms after the first`);
  assert.deepEqual(enqueued, ['wrun_of_the_dead']);
  assert.ok(fake.of('claim').at(-1).at >= beats[1].at);
  await client.stop();
});

/**
 * The heartbeats the fake receives from now on, and a wait for the n-th of them: bounded far below
 * the 20 s interval of slowBeats, so that a loaded machine's late timers do not matter.
 */
function beatsFromNow(fake) {
  const before = fake.of('heartbeat').length;
  const beatsSince = () => fake.of('heartbeat').slice(before);
  const until = async (n) => {
    for (const deadline = Date.now() + 5_000; beatsSince().length < n && Date.now() < deadline; ) await sleep(20);
    return beatsSince();
  };
  return { beatsSince, until };
}

test('new work is reported promptly: an execution that begins is in a heartbeat within reportPromptlyMs, at most one such beat a second', async () => {
  const fake = await fakeRollcall({ register: () => slowBeats(fake.defaults.register()) });
  const client = startRecovery(base(fake.url));
  await client.recovered;
  await sleep(100);
  const { beatsSince, until } = beatsFromNow(fake);
  const began = Date.now();
  client.tracker.begin('wrun_new', 'msg_new');
  const [first] = await until(1);
  assert.ok(first, 'a prompt beat, not a whole 20 s interval later');
  assert.ok(first.at - began >= 200, `it came ${first.at - began} ms after the begin, not before reportPromptlyMs`);
  assert.deepEqual(first.body.inFlight, [{ runId: 'wrun_new', messageId: 'msg_new' }]);
  // More work at once: reported together in one beat, no sooner than a second after the last.
  client.tracker.begin('wrun_second', 'msg_2');
  client.tracker.begin('wrun_third', 'msg_3');
  const [, second] = await until(2);
  assert.ok(second, 'the second batch of work is reported too');
  assert.ok(second.at - first.at >= 990, `${second.at - first.at} ms after the previous beat`);
  assert.equal(second.body.inFlight.length, 3);
  // An execution that begins again while already in flight is no news.
  client.tracker.begin('wrun_new', 'msg_new');
  await sleep(1_300);
  assert.equal(beatsSince().length, 2);
  await client.stop();
});

test('queue workers: those known at registration are registered, one found later is named in the next beat within reportPromptlyMs, once', async () => {
  const workers = new QueueWorkers();
  workers.add('worker-a');
  const fake = await fakeRollcall({ register: () => slowBeats(fake.defaults.register()) });
  const client = startRecovery(base(fake.url, { workerIds: ['static-1'], queueWorkers: workers }));
  await client.recovered;
  assert.deepEqual(fake.of('register')[0].body.workerIds, ['static-1', 'worker-a']);
  await sleep(100);
  const { until } = beatsFromNow(fake);
  const found = Date.now();
  workers.add('worker-b');
  workers.add('worker-a'); // seen before: no news
  const [first] = await until(1);
  assert.ok(first, 'a prompt beat, not a whole 20 s interval later');
  assert.ok(first.at - found >= 200, `${first.at - found} ms after it was found, not before reportPromptlyMs`);
  assert.deepEqual(first.body.workerIds, ['worker-b'], 'only the worker the service does not have');
  // The next beat (a new execution) names no worker again.
  client.tracker.begin('wrun_1', 'msg_1');
  const [, second] = await until(2);
  assert.ok(second);
  assert.equal(second.body.workerIds, undefined);
  await client.stop();
});

test('queue workers: a beat that failed names its workers again in the next one', async () => {
  const workers = new QueueWorkers();
  const fake = await fakeRollcall({
    register: () => slowBeats(fake.defaults.register()),
    heartbeat: (req, n) => (n === 1 ? { status: 503, body: {} } : fake.defaults.heartbeat()),
  });
  const client = startRecovery(base(fake.url, { queueWorkers: workers }));
  await client.recovered;
  assert.equal(fake.of('register')[0].body.workerIds, undefined, 'none known yet: none sent');
  const beats = async (n) => {
    for (const deadline = Date.now() + 5_000; fake.of('heartbeat').length < n && Date.now() < deadline; ) await sleep(20);
  };
  workers.add('worker-x');
  await beats(1);
  client.tracker.begin('wrun_1', 'msg_1'); // new work: another prompt beat, a second after the first
  await beats(2);
  const [failed, next] = fake.of('heartbeat');
  assert.deepEqual(failed.body.workerIds, ['worker-x']);
  assert.ok(next, 'a second beat');
  assert.deepEqual(next.body.workerIds, ['worker-x'], 'named again: the first answer never came');
  await client.stop();
});

test('QueueWorkers notices the id of a graphile worker taking a job, and nothing else', () => {
  const workers = new QueueWorkers();
  const seen = [];
  workers.onNew((id) => seen.push(id));
  const takesAJob = 'with j as (select ...) update "graphile_worker"._private_jobs as jobs set attempts = jobs.attempts + 1, locked_by = $1::text, locked_at = now() from j where jobs.id = j.id returning *';
  workers.noticeQuery({ text: takesAJob, values: ['worker-1f', [1, 2]] });
  workers.noticeQuery(takesAJob, ['worker-2e', [1]]);
  workers.noticeQuery({ text: takesAJob, values: ['worker-1f', [1]] }); // again: not new
  workers.noticeQuery({ text: 'select * from runs where id = $1', values: ['worker-3d'] });
  workers.noticeQuery({ text: 'update jobs set locked_by = null where locked_by = $2', values: ['x', 'worker-4c'] });
  workers.noticeQuery({ text: takesAJob, values: [42] });
  workers.noticeQuery({ text: takesAJob });
  workers.noticeQuery(null);
  assert.deepEqual(workers.list(), ['worker-1f', 'worker-2e']);
  assert.deepEqual(seen, ['worker-1f', 'worker-2e']);
});

test('reportPromptlyMs: 0 leaves new work to the regular beat', async () => {
  const fake = await fakeRollcall({ register: () => slowBeats(fake.defaults.register()) });
  const client = startRecovery(base(fake.url, { reportPromptlyMs: 0 }));
  await client.recovered;
  await sleep(100);
  const before = fake.of('heartbeat').length;
  client.tracker.begin('wrun_new', 'msg_new');
  await sleep(600);
  assert.equal(fake.of('heartbeat').length, before);
  await client.stop();
});

test('once done, an idle claim held by the service brings a takeover at once, without a heartbeat', async () => {
  const takeover = batch(9, ['wrun_of_the_leaver']);
  takeover.body.batch.epochKind = 'takeover';
  const fake = await fakeRollcall({
    register: () => slowBeats(fake.defaults.register()),
    // The first idle claim is held 300 ms, then a peer leaves and it gets the takeover.
    claim: async (req, n) =>
      req.body.idle && n === 2
        ? (await sleep(300), takeover)
        : req.body.idle
          ? 'hang'
          : { status: 200, body: { status: 'done', epochId: 1 } },
  });
  const enqueued = [];
  const client = startRecovery(base(fake.url, { enqueue: async (runs) => enqueued.push(...runs.map((r) => r.runId)) }));
  await client.recovered;
  await sleep(600);
  assert.deepEqual(enqueued, ['wrun_of_the_leaver']);
  // The stand-in's heartbeats never say recoveryPending: the held claim alone brought it.
  const claims = fake.of('claim');
  assert.deepEqual(claims[1].body, { waitMs: 20_000, idle: true });
  await client.stop();
});

test('recheckAfterMs is ignored when absent, negative, or not sooner than the interval', async () => {
  const fake = await fakeRollcall({
    register: () => slowBeats(fake.defaults.register()),
    heartbeat: (req, n) => ({
      status: 200,
      body: { leaseExpiresAt: new Date().toISOString(), recoveryPending: false, recheckAfterMs: n === 1 ? -5 : 25_000 },
    }),
  });
  const client = startRecovery(base(fake.url));
  client.tracker.begin('wrun_mine');
  await client.recovered;
  await sleep(300);
  assert.equal(fake.of('heartbeat').length, 1);
  await client.stop();
});

test('a 410 on a heartbeat fences: claiming stops, onFenced runs, it registers as a new instance', async () => {
  const fake = await fakeRollcall({
    heartbeat: (req) =>
      req.auth === 'Bearer rci_1' ? problem(410, 'instance-gone') : fakeDefaults(fake).heartbeat(),
  });
  const events = [];
  const client = startRecovery(base(fake.url, { onFenced: (e) => events.push(['onFenced', e.reason]) }));
  client.on('fenced', (e) => events.push(['fenced', e.instanceId, e.error.status]));
  client.on('registered', (e) => events.push(['registered', e.instanceId, e.previousInstanceId]));
  await client.recovered;
  for (let i = 0; i < 40 && events.length < 4; i++) await sleep(50);
  await client.stop();
  assert.deepEqual(events.slice(0, 4), [
    ['registered', '00000000-0000-0000-0000-000000000001', null],
    ['fenced', '00000000-0000-0000-0000-000000000001', 410],
    ['onFenced', 'gone'],
    ['registered', '00000000-0000-0000-0000-000000000002', '00000000-0000-0000-0000-000000000001'],
  ]);
  assert.equal(client.stats.fencedEvents, 1);
  assert.equal(client.stats.registrations, 2);
});

test('unrenewable lease: heartbeats that never answer lapse the lease, and an answer renews the same instance', async () => {
  let answering = false;
  const fake = await fakeRollcall({
    heartbeat: (req) => (req.auth === 'Bearer rci_1' && !answering ? 'hang' : fakeDefaults(fake).heartbeat()),
  });
  const events = [];
  const client = startRecovery(base(fake.url, { requestTimeoutMs: 5000 }));
  for (const e of ['lease-lapsed', 'lease-renewed', 'fenced', 'registered']) {
    client.on(e, (p) => events.push({ e, id: p.instanceId, at: Date.now() }));
  }
  const registeredAt = Date.now();
  await client.recovered;
  for (let i = 0; i < 60 && !events.some((x) => x.e === 'lease-lapsed'); i++) await sleep(50);
  const lapse = events.find((x) => x.e === 'lease-lapsed');
  assert.ok(lapse, 'the lease lapsed');
  const after = lapse.at - registeredAt;
  assert.ok(after >= 1900 && after < 2600, `lapsed ${after} ms after registering (lease 2000 ms)`);
  assert.equal(client.leaseLapsed, true);
  // Lapsed, not fenced: the same instance, heartbeating on.
  assert.equal(client.instanceId, '00000000-0000-0000-0000-000000000001');
  assert.equal(client.state, 'active');
  const beatsAtLapse = fake.of('heartbeat').length;
  answering = true;
  for (let i = 0; i < 60 && !events.some((x) => x.e === 'lease-renewed'); i++) await sleep(50);
  await client.stop();
  assert.ok(fake.of('heartbeat').length > beatsAtLapse, 'heartbeats went on after the lapse');
  assert.deepEqual(
    events.map((x) => [x.e, x.id]),
    [
      ['registered', '00000000-0000-0000-0000-000000000001'],
      ['lease-lapsed', '00000000-0000-0000-0000-000000000001'],
      ['lease-renewed', '00000000-0000-0000-0000-000000000001'],
    ],
  );
  assert.equal(client.stats.leaseLapses, 1);
  assert.equal(client.stats.fencedEvents, 0);
  assert.equal(client.stats.registrations, 1);
});

/**
 * A stand-in of the client's pool on the engine's database, answering what the job gate reads
 * (job-gate.js: whether the database shows Rollcall away) with `away()`.
 */
function gatePool(away) {
  const reads = [];
  return {
    reads,
    query: async (text, values) => {
      assert.match(text, /rollcall\.coordinator_beat/);
      reads.push(values);
      return { rows: [{ away: away() }] };
    },
  };
}

/** Options with the built-in pool (the stand-in) instead of an enqueue function. */
const withPool = (url, pool, extra = {}) => {
  const { enqueue, ...rest } = base(url, extra);
  return { ...rest, pool };
};

test('a lapsed lease holds new queue jobs while the database shows Rollcall running; a renewal lets them go', async (t) => {
  let answering = false;
  const fake = await fakeRollcall({
    heartbeat: (req) => (req.auth === 'Bearer rci_1' && !answering ? 'hang' : fakeDefaults(fake).heartbeat()),
  });
  const workers = new QueueWorkers();
  const pool = gatePool(() => false);
  const events = [];
  const client = startFor(t, withPool(fake.url, pool, { queueWorkers: workers, requestTimeoutMs: 5000 }));
  for (const e of ['lease-lapsed', 'jobs-held', 'jobs-resumed', 'lease-renewed']) {
    client.on(e, (p) => events.push([e, p.reason ?? null, workers.jobsHeld]));
  }
  await client.recovered;
  assert.equal(workers.jobsHeld, false, 'registered: jobs are taken');
  for (let i = 0; i < 80 && pool.reads.length < 2; i++) await sleep(50);
  assert.equal(workers.jobsHeld, true, 'lapsed, Rollcall running: no new job');
  assert.ok(pool.reads.length >= 2, 'the database is read again while the lease has lapsed');
  assert.equal(pool.reads[0][0], '00000000-0000-0000-0000-000000000001');
  answering = true;
  for (let i = 0; i < 60 && workers.jobsHeld; i++) await sleep(50);
  assert.equal(workers.jobsHeld, false, 'renewed: jobs are taken again');
  assert.deepEqual(events, [
    ['jobs-held', 'lease-lapsed', true],
    ['lease-lapsed', null, true],
    ['jobs-resumed', 'lease-renewed', false],
    ['lease-renewed', null, false],
  ]);
  assert.equal(client.stats.jobHolds, 1);
});

test('a lapsed lease while the database shows Rollcall away: jobs are held only until that is read', async (t) => {
  const fake = await fakeRollcall({ heartbeat: () => 'hang' });
  const workers = new QueueWorkers();
  const pool = gatePool(() => true);
  const events = [];
  const client = startFor(t, withPool(fake.url, pool, { queueWorkers: workers, requestTimeoutMs: 5000 }));
  for (const e of ['jobs-held', 'jobs-resumed']) client.on(e, (p) => events.push([e, p.reason]));
  await client.recovered;
  for (let i = 0; i < 80 && events.length < 2; i++) await sleep(50);
  assert.deepEqual(events, [
    ['jobs-held', 'lease-lapsed'],
    ['jobs-resumed', 'rollcall-away'],
  ]);
  assert.equal(workers.jobsHeld, false);
  assert.equal(client.leaseLapsed, true, 'still lapsed: the same instance, jobs taken meanwhile');
});

test('a lapsed lease whose database cannot be read keeps jobs held', async (t) => {
  const fake = await fakeRollcall({ heartbeat: () => 'hang' });
  const workers = new QueueWorkers();
  let reads = 0;
  const pool = {
    query: async () => {
      reads++;
      throw new Error('permission denied for schema rollcall');
    },
  };
  const client = startFor(t, withPool(fake.url, pool, { queueWorkers: workers, requestTimeoutMs: 5000 }));
  await client.recovered;
  for (let i = 0; i < 80 && reads < 2; i++) await sleep(50);
  assert.ok(reads >= 2);
  assert.equal(workers.jobsHeld, true);
});

test('gone: new jobs are held from the fence until the process is registered again', async (t) => {
  let heldWhileRegistering = null;
  const workers = new QueueWorkers();
  const fake = await fakeRollcall({
    heartbeat: (req) => (req.auth === 'Bearer rci_1' ? problem(410, 'instance-gone') : fakeDefaults(fake).heartbeat()),
    register: async (req, n) => {
      if (n === 2) {
        await sleep(300);
        heldWhileRegistering = workers.jobsHeld;
      }
      return fakeDefaults(fake).register();
    },
  });
  const events = [];
  const client = startFor(t, withPool(fake.url, gatePool(() => false), { queueWorkers: workers }));
  for (const e of ['fenced', 'jobs-held', 'jobs-resumed', 'registered']) {
    client.on(e, (p) => events.push([e, p.reason ?? p.instanceId]));
  }
  for (let i = 0; i < 60 && events.length < 5; i++) await sleep(50);
  assert.equal(heldWhileRegistering, true);
  assert.equal(workers.jobsHeld, false);
  assert.deepEqual(events, [
    ['registered', '00000000-0000-0000-0000-000000000001'],
    ['jobs-held', 'fenced'],
    ['fenced', 'gone'],
    ['jobs-resumed', 'registered'],
    ['registered', '00000000-0000-0000-0000-000000000002'],
  ]);
});

test('stop() lets the batch in hand finish, then leaves with the last in-flight set; an aborted signal stops too', async () => {
  let release;
  const fake = await fakeRollcall({ claim: (req, n) => (n === 1 ? batch(5, ['x']) : fakeDefaults(fake).claim()) });
  const controller = new AbortController();
  const client = startRecovery(
    base(fake.url, {
      signal: controller.signal,
      enqueue: () =>
        new Promise((r) => {
          release = r;
        }),
    }),
  );
  client.tracker.begin('wrun_last');
  while (!release) await sleep(10);
  controller.abort();
  await sleep(50);
  assert.equal(client.state, 'stopping');
  release({ failedRunIds: [] });
  await client.stop();
  assert.equal(client.state, 'stopped');
  assert.deepEqual(await client.recovered, { status: 'stopped' });
  assert.equal(fake.of('complete').length, 1, 'the batch in hand was completed');
  const claims = fake.of('claim');
  assert.equal(claims.length, 2, 'no other claimed than the one sent ahead while it was enqueued');
  assert.deepEqual(claims[1].body, {});
  const [leave] = fake.of('leave');
  assert.equal(leave.url, '/instances/00000000-0000-0000-0000-000000000001');
  assert.deepEqual(leave.body, { inFlight: ['wrun_last'] });
});

test('a heartbeat on the wire when the client stops is answered before the leave is sent, and none follows the leave', async () => {
  let answered = 0;
  const fake = await fakeRollcall({
    // The second beat is slow to answer (within its 200 ms timeout): stop() comes while it is on
    // the wire.
    heartbeat: (req, n) =>
      n === 2
        ? sleep(150).then(() => {
            answered = Date.now();
            return fakeDefaults(fake).heartbeat();
          })
        : fakeDefaults(fake).heartbeat(),
  });
  const client = startRecovery(base(fake.url));
  await client.recovered;
  while (fake.of('heartbeat').length < 2) await sleep(5);
  await client.stop({ exiting: true });
  const [leave] = fake.of('leave');
  assert.ok(answered > 0 && leave.at >= answered, `the leave (${leave.at}) came after the beat's answer (${answered})`);
  assert.ok(fake.of('heartbeat').every((h) => h.at <= leave.at), 'no heartbeat after the leave');
});

test('the default logger writes one JSON object per line', async () => {
  const fake = await fakeRollcall({});
  const lines = [];
  const { jsonLogger } = await import('../src/index.js');
  const client = startRecovery(base(fake.url, { logger: jsonLogger({ stream: { write: (s) => lines.push(s) } }) }));
  await client.recovered;
  await client.stop();
  const parsed = lines.map((l) => JSON.parse(l));
  const registered = parsed.find((l) => l.msg === 'registered with rollcall');
  assert.equal(registered.level, 'info');
  assert.equal(registered.logger, 'rollcall');
  assert.equal(registered.instanceId, '00000000-0000-0000-0000-000000000001');
  assert.ok(parsed.some((l) => l.msg === 'left rollcall'));
});

test('handleSignals: SIGTERM leaves with the in-flight set, then the process ends as SIGTERM would', async () => {
  const fake = await fakeRollcall({});
  const { spawnNode } = await import('./support/processes.js');
  const { writeFileSync, mkdtempSync, rmSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const dir = mkdtempSync(join(tmpdir(), 'rollcall-sigterm-'));
  const script = join(dir, 'app.mjs');
  writeFileSync(
    script,
    `import { startRecovery } from ${JSON.stringify(new URL('../src/index.js', import.meta.url).href)};
     const client = startRecovery({ url: ${JSON.stringify(fake.url)}, namespace: 'app', registrationSecret: 's',
       deploymentId: 'd1', enqueue: async () => {}, logger: false, handleSignals: 'SIGTERM' });
     client.tracker.begin('wrun_sig');
     await client.recovered;
     process.stdout.write(JSON.stringify({ event: 'ready' }) + '\\n');
     setInterval(() => {}, 1000); // a server would keep running`,
  );
  try {
    const app = spawnNode(script, { timeoutMs: 20_000 });
    await app.waitFor('ready', 10_000);
    app.kill('SIGTERM');
    const { signal } = await app.exited;
    assert.equal(signal, 'SIGTERM');
    const [leave] = fake.of('leave');
    assert.deepEqual(leave.body, { inFlight: ['wrun_sig'] });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a 429 on a claim is tried again after the body's retryAfterMs, not after the shorter backoff", async (t) => {
  const fake = await fakeRollcall({ claim: (req, n) => (n === 1 ? rateLimited(700) : fake.defaults.claim()) });
  const client = startFor(t, base(fake.url));
  assert.equal((await client.recovered).status, 'done');
  await client.stop();
  const [first, second] = fake.of('claim');
  const gap = second.at - first.at;
  assert.ok(gap >= 680 && gap < 1000, `the second claim came ${gap} ms after the 429 (asked: 700 ms; header: 1 s)`);
});

test('a 503 with a Retry-After header in seconds holds the next registration back that long', async (t) => {
  const fake = await fakeRollcall({
    register: (req, n) =>
      n === 1 ? { ...problem(503, 'database-unavailable'), headers: { 'retry-after': '1' } } : fake.defaults.register(),
  });
  const client = startFor(t, base(fake.url));
  assert.equal((await client.recovered).status, 'done');
  await client.stop();
  const [first, second] = fake.of('register');
  assert.ok(second.at - first.at >= 980, `registered again ${second.at - first.at} ms after a 503 asking for 1 s`);
});

test('a 503 with a Retry-After date holds the next claim back until then', async (t) => {
  const fake = await fakeRollcall({
    // HTTP dates have whole seconds: two seconds ahead is more than one second away.
    claim: (req, n) =>
      n === 1
        ? { ...problem(503, 'source-unavailable'), headers: { 'retry-after': new Date(Date.now() + 2000).toUTCString() } }
        : fake.defaults.claim(),
  });
  const client = startFor(t, base(fake.url));
  assert.equal((await client.recovered).status, 'done');
  await client.stop();
  const [first, second] = fake.of('claim');
  assert.ok(second.at - first.at >= 950, `claimed again ${second.at - first.at} ms after a 503 naming a date 1-2 s ahead`);
});

test('a 429 on a heartbeat: the next beat comes after retryAfterMs, not a whole interval later', async (t) => {
  const fake = await fakeRollcall({
    register: () => slowBeats(fake.defaults.register()),
    heartbeat: (req, n) => (n === 1 ? rateLimited(200) : fake.defaults.heartbeat()),
  });
  const client = startFor(t, base(fake.url));
  client.tracker.begin('wrun_mine'); // the registration's own beat publishes it
  await client.recovered;
  await sleep(700);
  const beats = fake.of('heartbeat');
  assert.equal(beats.length, 2, 'one beat after the wait, then nothing until the 20 s interval');
  const gap = beats[1].at - beats[0].at;
  assert.ok(gap >= 190 && gap < 600, `beat again ${gap} ms after a 429 asking for 200 ms`);
  assert.equal(client.stats.heartbeatFailures, 1);
  assert.equal(client.stats.fencedEvents, 0);
  await client.stop();
});

test("a 429 on a complete is tried again after the body's retryAfterMs", async (t) => {
  const fake = await fakeRollcall({
    claim: (req, n) => (n === 1 ? batch(4, ['a']) : fake.defaults.claim()),
    complete: (req, n) => (n === 1 ? rateLimited(600) : fake.defaults.complete(req)),
  });
  const completed = [];
  const client = startFor(t, base(fake.url));
  client.on('completed', (e) => completed.push(e.batchId));
  assert.equal((await client.recovered).status, 'done');
  await client.stop();
  const [first, second] = fake.of('complete');
  assert.ok(second.at - first.at >= 580, `completed again ${second.at - first.at} ms after a 429 asking for 600 ms`);
  assert.deepEqual(completed, [4]);
  assert.equal(client.stats.completesRefused, 0);
});

test('stop() during the pause between complete tries ends them at once and leaves', async (t) => {
  const fake = await fakeRollcall({
    claim: (req, n) => (n === 1 ? batch(6, ['a']) : fake.defaults.claim()),
    complete: () => problem(503, 'database-unavailable', 'down', { retryAfterMs: 5000 }),
  });
  const refused = [];
  const client = startFor(t, base(fake.url, { completeAttempts: 10, stopTimeoutMs: 8000 }));
  client.on('complete-refused', (e) => refused.push(e));
  while (fake.of('complete').length === 0) await sleep(10);
  await sleep(50); // in the 5 s pause now
  const stopping = Date.now();
  await client.stop();
  const took = Date.now() - stopping;
  assert.ok(took < 1000, `stop() took ${took} ms; it waited out the complete's pause`);
  assert.equal(fake.of('complete').length, 1, 'no further try once stopping');
  assert.equal(refused.length, 1);
  assert.equal(refused[0].status, 503);
  assert.equal(fake.of('leave').length, 1);
  assert.equal(client.state, 'stopped');
});

test('a failed leave is reported: leave-failed with the error, counted in stats', async (t) => {
  const fake = await fakeRollcall({ leave: () => problem(503, 'database-unavailable') });
  const failures = [];
  const client = startFor(t, base(fake.url));
  client.on('leave-failed', (e) => failures.push(e));
  await client.recovered;
  await client.stop();
  assert.equal(failures.length, 1);
  assert.equal(failures[0].instanceId, '00000000-0000-0000-0000-000000000001');
  assert.ok(failures[0].error instanceof RollcallError);
  assert.equal(failures[0].error.status, 503);
  assert.equal(client.stats.leaveFailures, 1);
  assert.equal(client.state, 'stopped');
});

test('a leave that succeeds reports no failure', async (t) => {
  const fake = await fakeRollcall({});
  const failures = [];
  const client = startFor(t, base(fake.url));
  client.on('leave-failed', (e) => failures.push(e));
  await client.recovered;
  await client.stop();
  assert.equal(fake.of('leave').length, 1);
  assert.deepEqual(failures, []);
  assert.equal(client.stats.leaveFailures, 0);
});

test('gone means fenced whichever call hears it: a 410 on a complete, a 401 on a claim', async (t) => {
  const fake = await fakeRollcall({
    claim: (req) => (req.auth === 'Bearer rci_1' ? batch(2, ['a']) : fake.defaults.claim()),
    complete: () => problem(410, 'instance-gone'),
  });
  const fenced = [];
  const client = startFor(t, base(fake.url));
  client.on('fenced', (e) => fenced.push([e.instanceId, e.reason, e.error.status]));
  for (let i = 0; i < 40 && client.stats.registrations < 2; i++) await sleep(50);
  // The complete's 410 fenced the first instance; the second claims as a new one.
  assert.deepEqual(fenced, [['00000000-0000-0000-0000-000000000001', 'gone', 410]]);
  // The batch of the claim sent ahead may have been enqueued while the first complete was on its
  // way; its complete is refused too.
  assert.ok([1, 2].includes(client.stats.completesRefused), `${client.stats.completesRefused} completes refused`);
  assert.equal(client.instanceId, '00000000-0000-0000-0000-000000000002');

  const fake2 = await fakeRollcall({
    claim: (req) => (req.auth === 'Bearer rci_1' ? problem(401, 'unauthorized', 'the instance token is not known') : fake2.defaults.claim()),
  });
  const fenced2 = [];
  const client2 = startFor(t, base(fake2.url));
  client2.on('fenced', (e) => fenced2.push([e.reason, e.error.status]));
  assert.equal((await client2.recovered).status, 'done');
  assert.deepEqual(fenced2, [['gone', 401]]);
  assert.equal(client2.state, 'active');
  await Promise.all([client.stop(), client2.stop()]);
});

test('a registration that lands after stop() is left at once, and a failed leave of it is reported', async (t) => {
  let answer;
  const fake = await fakeRollcall({
    register: () => new Promise((resolve) => (answer = resolve)).then(() => fake.defaults.register()),
    leave: () => problem(503, 'database-unavailable'),
  });
  const failures = [];
  const client = startFor(t, base(fake.url));
  client.on('leave-failed', (e) => failures.push(e));
  while (!answer) await sleep(10);
  await client.stop(); // the registration is still on the wire
  answer();
  for (let i = 0; i < 80 && failures.length === 0; i++) await sleep(25);
  assert.equal(fake.of('leave').length, 1);
  assert.equal(fake.of('leave')[0].auth, 'Bearer rci_1');
  assert.deepEqual(failures.map((e) => [e.instanceId, e.error.status]), [['00000000-0000-0000-0000-000000000001', 503]]);
  assert.equal(client.state, 'stopped');
  assert.equal(client.instanceId, null);
  assert.equal(client.stats.registrations, 0);
});
