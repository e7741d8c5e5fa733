// Pure pieces: payload encoding (checked with the engine's own schemas), routing, the tracker,
// errors, backoff, ULIDs, and the world adapter on a stand-in world.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { WorkflowInvokePayloadSchema, parseQueueName } from '@workflow/world';
import {
  RollcallError,
  backoff,
  createTracker,
  jobSpecs,
  monotonicUlid,
  routeOf,
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

test('jobSpecs: max_attempts 3 and nothing else set (no key, no queue, run now)', () => {
  const [spec] = jobSpecs([{ runId: 'wrun_1', workflowName: 'a', queueName: '__wkf_workflow_a' }], { jobPrefix: 'p_' });
  assert.deepEqual(Object.keys(spec).sort(), ['identifier', 'max_attempts', 'payload']);
  assert.equal(spec.identifier, 'p_flows');
  assert.equal(spec.max_attempts, 3);
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

  const world = {
    createQueueHandler(prefix, handler) {
      return (message) => handler(message, { attempt: 1 });
    },
  };
  const tracker = createTracker();
  assert.equal(trackWorld(world, tracker), world);
  trackWorld(world, tracker); // twice: still one wrapper
  const seen = [];
  const flow = world.createQueueHandler('__wkf_workflow_', async () => seen.push(tracker.list()));
  const step = world.createQueueHandler('__wkf_step_', async () => seen.push(tracker.list()));
  await flow({ runId: 'wrun_a' });
  await step({ workflowRunId: 'wrun_b' });
  assert.deepEqual(seen, [['wrun_a'], ['wrun_b']]);
  assert.deepEqual(tracker.list(), []);
});
