// Pure pieces: payload encoding (checked with the engine's own schemas), routing, the tracker,
// errors, backoff, ULIDs, and the world adapter on a stand-in world.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { WorkflowInvokePayloadSchema, parseQueueName } from '@workflow/world';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Lifecycle, TRANSITIONS } from '../src/lifecycle.js';
import { RETRY_AFTER_MAX_MS, parseRetryAfter, retryAfterOf, retryDelay } from '../src/retry.js';
import {
  RollcallApi,
  RollcallError,
  backoff,
  createTracker,
  jobSpecs,
  messageIdOf,
  QueueWorkers,
  mayTakeJobs,
  monotonicUlid,
  noticingPool,
  routeOf,
  takesJobs,
  runIdOfMessage,
  trackWorld,
  workflowMessage,
} from '../src/index.js';

const { MessageData } = await import(new URL('./message.js', import.meta.resolve('@workflow/world-postgres')));

test('workflowMessage is what the engine decodes: sub-queue id, attempt 1, base64 JSON {runId}', () => {
  const m = workflowMessage('checkout', 'wrun_01ABCDEFGHJKMNPQRSTVWXYZ01');
  assert.deepEqual(Object.keys(m), ['attempt', 'messageId', 'id', 'data']);
  const parsed = MessageData.parse(m);
  assert.equal(parsed.id, 'checkout');
  assert.equal(parsed.attempt, 1);
  assert.ok(Buffer.isBuffer(parsed.data));
  assert.deepEqual(WorkflowInvokePayloadSchema.parse(JSON.parse(parsed.data.toString())), {
    runId: 'wrun_01ABCDEFGHJKMNPQRSTVWXYZ01',
  });
  // Exactly the bytes of the engine's transport for its recovery message.
  assert.equal(Buffer.from(m.data, 'base64').toString(), '{"runId":"wrun_01ABCDEFGHJKMNPQRSTVWXYZ01"}');
});

test('routeOf follows the engine: task from the queue kind, payload id from the queue name', () => {
  for (const queueName of ['__wkf_workflow_checkout', '__shop_wkf_workflow_checkout']) {
    assert.equal(parseQueueName(queueName).id, 'checkout');
    assert.deepEqual(routeOf({ queueName, workflowName: 'ignored' }), { task: 'workflow_flows', id: 'checkout' });
  }
  assert.deepEqual(routeOf({ queueName: '__wkf_step_charge' }, 'app_'), { task: 'app_steps', id: 'charge' });
  assert.deepEqual(routeOf({ workflowName: 'wf//x' }), { task: 'workflow_flows', id: 'wf//x' });
});

test('jobSpecs: a fresh message id that is also the job key; max_attempts 3; no queue, run now', () => {
  const runs = [
    { runId: 'wrun_1', workflowName: 'a', queueName: '__wkf_workflow_a' },
    { runId: 'wrun_2', workflowName: 'a', queueName: '__wkf_workflow_a' },
  ];
  const specs = jobSpecs(runs, { jobPrefix: 'p_' });
  for (const spec of specs) {
    assert.deepEqual(Object.keys(spec).sort(), ['identifier', 'job_key', 'max_attempts', 'payload']);
    assert.equal(spec.identifier, 'p_flows');
    assert.equal(spec.max_attempts, 3);
    assert.match(spec.payload.messageId, /^msg_[0-9A-HJKMNP-TV-Z]{26}$/);
    assert.equal(spec.job_key, spec.payload.messageId, 'keyed by its own message id, as the engine keys its jobs');
    assert.equal(MessageData.parse(spec.payload).messageId, spec.payload.messageId);
  }
  assert.notEqual(specs[0].job_key, specs[1].job_key, 'every key is fresh');
  // A fresh batch again: never a key seen before.
  const again = jobSpecs(runs);
  assert.equal(new Set([...specs, ...again].map((s) => s.job_key)).size, 4);
});

test("jobSpecs: a run that carries its owner's message id is re-driven with exactly that id and no key", () => {
  const [owned, fresh, bad] = jobSpecs([
    { runId: 'wrun_1', workflowName: 'a', messageId: 'msg_01JOWNER0000000000000000AA' },
    { runId: 'wrun_2', workflowName: 'a' },
    { runId: 'wrun_3', workflowName: 'a', messageId: 'not a message id' },
  ]);
  assert.equal(owned.payload.messageId, 'msg_01JOWNER0000000000000000AA');
  assert.equal('job_key' in owned, false, "no key: the engine's own job may still hold that key");
  assert.equal(MessageData.parse(owned.payload).messageId, 'msg_01JOWNER0000000000000000AA');
  assert.equal(Buffer.from(owned.payload.data, 'base64').toString(), '{"runId":"wrun_1"}');
  assert.equal(fresh.job_key, fresh.payload.messageId);
  // Something the engine could not parse as a message id is not used: a fresh, keyed message.
  assert.match(bad.payload.messageId, /^msg_[0-9A-HJKMNP-TV-Z]{26}$/);
  assert.equal(bad.job_key, bad.payload.messageId);
});

test('monotonic ULIDs: 26 Crockford characters that sort in creation order, even within a millisecond', () => {
  const ulid = monotonicUlid();
  const ids = Array.from({ length: 1000 }, () => ulid(1_700_000_000_000));
  for (const id of ids) assert.match(id, /^[0-9A-HJKMNP-TV-Z]{26}$/);
  assert.deepEqual([...ids].sort(), ids);
  assert.equal(new Set(ids).size, ids.length);
  const later = ulid(1_700_000_000_001);
  assert.ok(later > ids.at(-1));
  assert.ok(ulid(1_600_000_000_000) > later, 'a clock that steps back does not break the order');
  assert.equal(monotonicUlid()(0).slice(0, 10), '0000000000');
});

test('tracker: counted begin/end, wrap ends on throw, list', async () => {
  const t = createTracker();
  t.begin('a');
  t.begin('a');
  t.begin('b');
  assert.deepEqual(t.list().sort(), ['a', 'b']);
  t.end('a');
  assert.ok(t.has('a'), 'still one execution of a');
  t.end('a');
  t.end('a'); // extra: ignored
  assert.deepEqual(t.list(), ['b']);
  await assert.rejects(
    t.wrap('c', async () => {
      assert.ok(t.has('c'));
      throw new Error('boom');
    }),
    /boom/,
  );
  assert.equal(t.has('c'), false);
  assert.equal(await t.wrap('d', async () => 42), 42);
  assert.equal(t.size, 1);
  assert.throws(() => t.begin(''), TypeError);
});

test('tracker with message ids: one entry per execution, counted, bare run ids only when no id is known', async () => {
  const t = createTracker();
  t.begin('wrun_a', 'msg_1'); // a workflow replay
  t.begin('wrun_a', 'msg_2'); // a step of the same run, another message
  t.begin('wrun_a', 'msg_2'); // the same message twice (a redelivery racing the first)
  t.begin('wrun_b'); // no message id known
  t.begin('wrun_c');
  t.begin('wrun_c', 'msg_3');
  assert.deepEqual(t.entries(), [
    { runId: 'wrun_a', messageId: 'msg_1' },
    { runId: 'wrun_a', messageId: 'msg_2' },
    { runId: 'wrun_c', messageId: 'msg_3' },
    'wrun_b',
  ]);
  assert.deepEqual(t.list(), ['wrun_a', 'wrun_b', 'wrun_c']);
  assert.equal(t.size, 3);
  t.end('wrun_a', 'msg_2');
  assert.deepEqual(t.entries()[1], { runId: 'wrun_a', messageId: 'msg_2' }, 'counted: one of two ended');
  t.end('wrun_a', 'msg_2');
  t.end('wrun_a', 'msg_1');
  assert.equal(t.has('wrun_a'), false);
  t.end('wrun_c', 'msg_3');
  assert.deepEqual(t.entries(), ['wrun_b', 'wrun_c'], 'the run stays in flight as a bare id');
  t.end('wrun_c', 'msg_unknown'); // ends nothing: not this execution
  assert.deepEqual(t.list(), ['wrun_b', 'wrun_c']);
  const during = await t.wrap('wrun_d', async () => t.entries(), 'msg_4');
  assert.deepEqual(during, [{ runId: 'wrun_d', messageId: 'msg_4' }, 'wrun_b', 'wrun_c']);
  assert.equal(t.has('wrun_d'), false);
});

test('RollcallError: slug, retryable, gone', () => {
  const e = new RollcallError({ type: 'urn:rollcall:problem:stale-fence', status: 409, detail: 'd', operation: 'complete' });
  assert.equal(e.slug, 'stale-fence');
  assert.equal(e.retryable, false);
  assert.equal(e.gone, false);
  assert.match(e.message, /complete: 409 urn:rollcall:problem:stale-fence \(d\)/);
  assert.equal(new RollcallError({ type: 'urn:rollcall:client:unreachable', status: 0 }).retryable, true);
  assert.equal(new RollcallError({ type: 'x', status: 503 }).retryable, true);
  assert.equal(new RollcallError({ type: 'urn:rollcall:problem:rate-limited', status: 429 }).retryable, true);
  assert.equal(new RollcallError({ type: 'x', status: 410 }).gone, true);
  assert.equal(new RollcallError({ type: 'x', status: 503 }).retryAfterMs, null);
});

test('RollcallError.gone: a 410 from any call, a 401 only to a call made with the instance token', () => {
  for (const operation of ['claim', 'complete', 'heartbeat', 'leave']) {
    assert.equal(new RollcallError({ type: 'urn:rollcall:problem:unauthorized', status: 401, operation }).gone, true, operation);
    assert.equal(new RollcallError({ type: 'urn:rollcall:problem:instance-gone', status: 410, operation }).gone, true, operation);
  }
  // A 401 to a registration is a wrong secret, not a gone instance.
  assert.equal(new RollcallError({ type: 'urn:rollcall:problem:unauthorized', status: 401, operation: 'register' }).gone, false);
  assert.equal(new RollcallError({ type: 'urn:rollcall:problem:forbidden', status: 403, operation: 'heartbeat' }).gone, false);
});

test('lifecycle: every move in TRANSITIONS is made, every other one refused without a change', () => {
  const states = Object.keys(TRANSITIONS);
  assert.deepEqual(states.sort(), ['active', 'failed', 'fallback', 'fenced', 'new', 'registering', 'stopped', 'stopping']);
  // Reach each state by legal moves, then try every move from it.
  const paths = {
    new: [],
    registering: ['registering'],
    active: ['registering', 'active'],
    fenced: ['registering', 'active', 'fenced'],
    fallback: ['registering', 'fallback'],
    failed: ['registering', 'failed'],
    stopping: ['stopping'],
    stopped: ['stopping', 'stopped'],
  };
  for (const from of states) {
    for (const to of states) {
      const life = new Lifecycle();
      for (const step of paths[from]) assert.equal(life.to(step), true, `${life.state} -> ${step}`);
      assert.equal(life.state, from);
      const legal = TRANSITIONS[from].includes(to);
      assert.equal(life.to(to), legal, `${from} -> ${to}`);
      assert.equal(life.state, legal ? to : from);
    }
  }
  // What the client relies on: a stopping client never becomes active, fenced or failed again;
  // every state but the two last can be stopped; nothing leaves stopped.
  for (const from of states) {
    assert.equal(TRANSITIONS[from].includes('stopping'), from !== 'stopping' && from !== 'stopped', from);
  }
  assert.deepEqual(TRANSITIONS.stopping, ['stopped']);
  assert.deepEqual(TRANSITIONS.stopped, []);
  const life = new Lifecycle();
  assert.equal(life.stopping, false);
  life.to('stopping');
  assert.equal(life.stopping, true);
  assert.equal(life.to('active'), false);
});

test('parseRetryAfter: delay-seconds or an HTTP date; anything else is no hint', () => {
  const now = Date.parse('Mon, 30 Nov 2026 12:00:00 GMT');
  assert.equal(parseRetryAfter('2', now), 2000);
  assert.equal(parseRetryAfter(' 0 ', now), 0);
  assert.equal(parseRetryAfter('Mon, 30 Nov 2026 12:00:03 GMT', now), 3000);
  assert.equal(parseRetryAfter('Monday, 30-Nov-26 12:00:05 GMT', now), 5000, 'the obsolete RFC 850 form');
  assert.equal(parseRetryAfter('Mon, 30 Nov 2026 11:59:00 GMT', now), 0, 'a date passed: try now');
  for (const bad of [null, undefined, '', 'soon', '1.5', '-3', '2 s']) assert.equal(parseRetryAfter(bad, now), null, String(bad));
});

test("retryAfterOf: only 429 and 503; the body's retryAfterMs first, then the header", () => {
  const now = Date.parse('Mon, 30 Nov 2026 12:00:00 GMT');
  assert.equal(retryAfterOf(429, '1', { retryAfterMs: 340 }, now), 340, 'the exact figure beats the rounded header');
  assert.equal(retryAfterOf(429, '1', null, now), 1000);
  assert.equal(retryAfterOf(503, 'Mon, 30 Nov 2026 12:00:02 GMT', { type: 'x' }, now), 2000);
  assert.equal(retryAfterOf(503, null, { retryAfterMs: 'soon' }, now), null);
  assert.equal(retryAfterOf(503, null, null, now), null);
  assert.equal(retryAfterOf(500, '5', { retryAfterMs: 5 }, now), null);
  assert.equal(retryAfterOf(409, '5', null, now), null);
});

test('retryDelay: the hint when there is one (capped), else backoff', () => {
  assert.equal(retryDelay({ retryAfterMs: 1234 }, 7), 1234);
  assert.equal(retryDelay({ retryAfterMs: 0 }, 3), 0);
  assert.equal(retryDelay({ retryAfterMs: 3_600_000 }, 1), RETRY_AFTER_MAX_MS);
  for (const error of [{ retryAfterMs: null }, new Error('x'), undefined]) {
    const d = retryDelay(error, 3);
    assert.ok(d >= 500 && d <= 1000, `backoff of try 3: ${d}`);
  }
});

test('RollcallApi: a 429 or 503 carries its wait, read from the body or the Retry-After header', async () => {
  const answers = [
    new Response(JSON.stringify({ type: 'urn:rollcall:problem:rate-limited', status: 429, retryAfterMs: 420 }), {
      status: 429,
      headers: { 'retry-after': '1', 'content-type': 'application/problem+json' },
    }),
    new Response('<html>busy</html>', { status: 503, headers: { 'retry-after': '3' } }),
    new Response(JSON.stringify({ type: 'urn:rollcall:problem:internal-error', status: 500 }), {
      status: 500,
      headers: { 'retry-after': '3' },
    }),
  ];
  const api = new RollcallApi({ url: 'http://rollcall.invalid', fetch: async () => answers.shift() });
  const errors = [];
  for (let i = 0; i < 3; i++) errors.push(await api.claim('rci_x', 10).catch((e) => e));
  assert.deepEqual(
    errors.map((e) => [e.status, e.retryable, e.retryAfterMs]),
    [
      [429, true, 420],
      [503, true, 3000],
      [500, true, null],
    ],
  );
  assert.equal(errors[1].type, 'urn:rollcall:client:bad-response');
});

test('backoff: exponential, capped, jittered within [ceiling/2, ceiling]', () => {
  for (let attempt = 1; attempt <= 12; attempt++) {
    const ceiling = Math.min(5000, 250 * 2 ** (attempt - 1));
    for (let i = 0; i < 50; i++) {
      const d = backoff(attempt);
      assert.ok(d >= ceiling / 2 && d <= ceiling, `attempt ${attempt}: ${d}`);
    }
  }
});

test('runIdOfMessage and trackWorld on a stand-in world', async () => {
  assert.equal(runIdOfMessage('__wkf_workflow_', { runId: 'r1' }), 'r1');
  assert.equal(runIdOfMessage('__ns_wkf_step_', { workflowRunId: 'r2', stepId: 's' }), 'r2');
  assert.equal(runIdOfMessage('__wkf_step_', { runId: 'r3' }), undefined);
  assert.equal(runIdOfMessage('__wkf_workflow_', null), undefined);

  // The engines' queue handler passes (message, {attempt, queueName, messageId}).
  const world = {
    createQueueHandler(prefix, handler) {
      return (message, messageId) => handler(message, { attempt: 1, queueName: `${prefix}x`, messageId });
    },
  };
  const tracker = createTracker();
  assert.equal(trackWorld(world, tracker), world);
  trackWorld(world, tracker); // twice: still one wrapper
  const seen = [];
  const flow = world.createQueueHandler('__wkf_workflow_', async () => seen.push(tracker.entries()));
  const step = world.createQueueHandler('__wkf_step_', async () => seen.push(tracker.entries()));
  await flow({ runId: 'wrun_a' }, 'msg_A');
  await step({ workflowRunId: 'wrun_b' }, 'msg_B');
  await flow({ runId: 'wrun_c' }); // no message id known
  assert.deepEqual(seen, [[{ runId: 'wrun_a', messageId: 'msg_A' }], [{ runId: 'wrun_b', messageId: 'msg_B' }], ['wrun_c']]);
  assert.deepEqual(tracker.list(), []);
});

test('messageIdOf: the handler meta first, then the message payload', () => {
  assert.equal(messageIdOf({ runId: 'r', messageId: 'msg_p' }, { messageId: 'msg_m' }), 'msg_m');
  assert.equal(messageIdOf({ runId: 'r', messageId: 'msg_p' }, { attempt: 1 }), 'msg_p');
  assert.equal(messageIdOf({ runId: 'r' }, undefined), undefined);
  assert.equal(messageIdOf(null, { messageId: '' }), undefined);
});

test('trackWorld admit: a delivery waits while admit() hands back a pending promise, and is not in flight meanwhile', async () => {
  let gate = null;
  const world = { createQueueHandler: (prefix, handler) => (m) => handler(m, { messageId: 'msg_1' }) };
  const tracker = createTracker();
  trackWorld(world, tracker, { admit: () => gate?.promise });
  let ran = 0;
  const flow = world.createQueueHandler('__wkf_workflow_', async () => ran++);
  await flow({ runId: 'wrun_a' });
  assert.equal(ran, 1);
  let open;
  gate = { promise: new Promise((r) => (open = r)) };
  const held = flow({ runId: 'wrun_b' });
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(ran, 1, 'held back');
  assert.deepEqual(tracker.list(), []);
  open();
  await held;
  assert.equal(ran, 2);
});

test('mayTakeJobs: none while fenced, none while the lease has lapsed unless Rollcall is seen away, else all', () => {
  const cases = [
    [{ state: 'active', lapsed: false }, true],
    [{ state: 'active', lapsed: true }, false],
    [{ state: 'active', lapsed: true, serviceAway: false }, false],
    [{ state: 'active', lapsed: true, serviceAway: true }, true],
    [{ state: 'fenced', lapsed: false }, false],
    [{ state: 'fenced', lapsed: false, serviceAway: true }, false],
    // No lease to lose: not registered yet, running without Rollcall, or shutting down.
    [{ state: 'new', lapsed: false }, true],
    [{ state: 'registering', lapsed: false }, true],
    [{ state: 'fallback', lapsed: false }, true],
    [{ state: 'failed', lapsed: false }, true],
    [{ state: 'stopping', lapsed: false }, true],
    [{ state: 'stopped', lapsed: false }, true],
  ];
  for (const [at, expected] of cases) assert.equal(mayTakeJobs(at), expected, JSON.stringify(at));
});

/** The SQL template of one of graphile-worker's statements, from the installed package's source. */
function graphileStatement(appRequire, file, marker) {
  const source = readFileSync(join(dirname(appRequire.resolve('graphile-worker/package.json')), 'dist/sql', file), 'utf8');
  const from = source.indexOf(marker);
  assert.ok(from >= 0, `${file} has ${marker}`);
  return source.slice(from, source.indexOf('`', from + marker.length + 1));
}

test("takesJobs: graphile-worker's statement that takes a job to run it, and none of its others", () => {
  const here = createRequire(import.meta.url);
  // graphile-worker 0.16.6, as world-postgres 4.3.7 and the 5.0 betas install it.
  assert.equal(takesJobs(graphileStatement(here, 'getJob.js', 'const text = `')), true);
  assert.equal(takesJobs(graphileStatement(here, 'failJob.js', 'text: `')), false);
  assert.equal(takesJobs(graphileStatement(here, 'completeJob.js', 'text: `')), false);
  // The shapes of 0.18's statements that fail or return a pool's jobs name its id as $1 as well.
  assert.equal(takesJobs('update jobs set attempts = GREATEST(0, attempts - 1), locked_by = null where id = any($2) and locked_by = $1::text'), false);
  assert.equal(takesJobs("update jobs set run_at = now() + (exp(least(attempts, 10)) * interval '1 second') where id = (el->>'jobId')::bigint and locked_by = $1::text"), false);
  assert.equal(takesJobs('select * from runs where id = $1'), false);
  assert.equal(takesJobs(undefined), false);
});

/** A stand-in of the `pg` module: a Client whose query records what was sent, and a Pool that makes them. */
function standInPg(sent) {
  class Client {
    query(config, values, callback) {
      sent.push(typeof config === 'string' ? config : config.text);
      const result = { rows: [{ sent: true }], rowCount: 1 };
      const done = [callback, values].find((f) => typeof f === 'function');
      if (done) return void process.nextTick(() => done(null, result));
      return Promise.resolve(result);
    }
  }
  class Pool {
    constructor(options) {
      this.client = new options.Client();
    }
  }
  return { Client, Pool };
}

test('noticingPool: while the workers hold jobs, a statement taking one is answered "no job" and never sent; any other goes through', async () => {
  const sent = [];
  const workers = new QueueWorkers();
  const pool = noticingPool(standInPg(sent), {}, workers);
  const take = 'with j as (select id from jobs limit 1 for update skip locked) update jobs set attempts = jobs.attempts + 1, locked_by = $1::text, locked_at = now() from j where jobs.id = j.id returning *';
  const fail = 'update jobs set last_error = $2, locked_by = null where id = $3 and locked_by = $1::text';
  assert.equal((await pool.client.query({ text: take, values: ['worker-a', [1]] })).rowCount, 1);
  assert.equal(workers.holdJobs(true), true);
  assert.equal(workers.holdJobs(true), false, 'already held');
  assert.equal(workers.jobsHeld, true);
  assert.deepEqual((await pool.client.query({ text: take, values: ['worker-a', [1]], name: 'get_job' })).rows, []);
  const byCallback = await new Promise((resolve, reject) =>
    pool.client.query(take, ['worker-b', [1]], (error, result) => (error ? reject(error) : resolve(result))),
  );
  assert.equal(byCallback.rowCount, 0);
  // A job already running still fails, completes or is returned as it would.
  assert.equal((await pool.client.query({ text: fail, values: ['worker-a', 'e', 7] })).rowCount, 1);
  assert.equal(workers.heldFetches, 2);
  assert.deepEqual(workers.list(), ['worker-a', 'worker-b'], 'worker ids are still learnt while held');
  assert.equal(workers.holdJobs(false), true);
  assert.equal((await pool.client.query({ text: take, values: ['worker-a', [1]] })).rowCount, 1);
  assert.deepEqual(sent, [take, fail, take]);
});

test('QueueWorkers.settled: resolves once every statement taking jobs that was sent has been answered', async () => {
  const workers = new QueueWorkers();
  let answer;
  const pg = {
    Client: class {
      query() {
        return new Promise((resolve) => (answer = resolve));
      }
    },
    Pool: class {
      constructor(options) {
        this.client = new options.Client();
      }
    },
  };
  const pool = noticingPool(pg, {}, workers);
  const take = 'update jobs set attempts = jobs.attempts + 1, locked_by = $1::text from j returning *';
  const pending = pool.client.query({ text: take, values: ['w'] });
  workers.holdJobs(true);
  let settled = false;
  workers.settled().then(() => (settled = true));
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(settled, false, 'a take sent before the hold is still unanswered');
  answer({ rows: [], rowCount: 0 });
  await pending;
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(settled, true);
});
