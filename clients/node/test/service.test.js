// The client against the REAL service (the packaged jar, its embedded PostgreSQL) and the REAL
// engine packages (@workflow/world-postgres 4.3.7's schemas and payload schema, graphile-worker
// 0.16.6's queue). Replicas are separate node processes. Everything runs on loopback, is bounded
// in time, and every process started here is killed in `after`, also when a test fails.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createWorld } from '@workflow/world-postgres';
import { WorkflowInvokePayloadSchema } from '@workflow/world';
import { graphileEnqueuer, startRecovery, startWorldWithoutRecovery, trackWorld, createTracker } from '../src/index.js';
import { addForeignJobs, jobs, pool as makePool, seedRuns } from './support/db.js';
import { resultOf, spawnClient } from './support/processes.js';
import { freePort, NAMESPACE, SECRET } from './support/service.js';
import { withService } from './support/suite.js';

// The engine's own MessageData schema: not exported by the package, so loaded from its dist.
const { MessageData } = await import(new URL('./message.js', import.meta.resolve('@workflow/world-postgres')));

let service;
let db;
withService((s, d) => {
  service = s;
  db = d;
});

const clientConfig = (deploymentId, name, extra = {}) => ({
  url: service.url,
  dbUrl: service.dbUrl,
  namespace: NAMESPACE,
  secret: SECRET,
  deploymentId,
  name,
  ...extra,
});

/** Jobs added since `before` (ids above its largest), grouped by run. */
function newJobsByRun(beforeJobs, afterJobs) {
  const maxBefore = Math.max(0, ...beforeJobs.map((j) => j.id));
  const added = afterJobs.filter((j) => j.id > maxBefore);
  const byRun = new Map();
  for (const j of added) byRun.set(j.runId, [...(byRun.get(j.runId) ?? []), j]);
  return { added, byRun };
}

function assertEngineJob(job, run) {
  assert.equal(job.task, 'workflow_flows');
  assert.equal(job.max_attempts, 3);
  assert.equal(job.key, job.payload.messageId, 'recovery jobs are keyed by their own fresh message id');
  assert.equal(job.job_queue_id, null, 'no named graphile queue');
  assert.equal(job.priority, 0);
  const message = MessageData.parse(job.payload); // the engine's own decoder accepts it
  assert.equal(message.id, run.workflowName);
  assert.equal(message.attempt, 1);
  assert.match(message.messageId, /^msg_[0-9A-HJKMNP-TV-Z]{26}$/);
  const body = WorkflowInvokePayloadSchema.parse(JSON.parse(message.data.toString('utf8')));
  assert.deepEqual(body, { runId: run.runId });
}

function workflowMessagePayload(run, messageId) {
  return {
    attempt: 1,
    messageId,
    id: run.workflowName,
    data: Buffer.from(JSON.stringify({ runId: run.runId })).toString('base64'),
  };
}

describe('against the real service', { timeout: 300_000 }, () => {
  test('four replicas share one boot recovery: one engine job per run that needs one, nothing else touched', async () => {
    const active = await seedRuns(db, { active: 2000, terminal: 1000 });
    const foreign = await addForeignJobs(db, active);
    const replicas = [1, 2, 3, 4].map((i) => spawnClient(clientConfig('deploy-shared', `replica-${i}`, { maxRuns: 100 })));
    const results = await Promise.all(replicas.map(resultOf));

    for (const r of results) assert.equal(r.outcome.status, 'done', JSON.stringify(r));
    // The first run sleeps on its own keyed wake-up job, and the second has a step job queued (its
    // delivery runs the step, then queues the workflow's next message): live wake paths, so
    // Rollcall skips them (has-queued-job) instead of adding a second job that would wake them early.
    const sleeping = active[0].runId;
    const stepping = active[1].runId;
    const needing = active.length - 2;
    const enqueued = results.reduce((n, r) => n + r.stats.runsEnqueued, 0);
    assert.equal(enqueued, needing, 'the replicas together enqueued every run that needs it once');
    assert.ok(results.filter((r) => r.stats.batches > 0).length >= 2, 'the work was shared');

    const all = await jobs(db);
    // Jobs that were there before are untouched, field by field.
    for (const f of foreign) assert.deepEqual(all.find((j) => j.id === f.id), f);
    const { added, byRun } = newJobsByRun(foreign, all);
    assert.equal(added.length, needing);
    assert.ok(!byRun.has(sleeping), 'the sleeping run got no second job');
    assert.ok(!byRun.has(stepping), 'the run with a queued step job got no second job');
    const activeById = new Map(active.map((r) => [r.runId, r]));
    for (const [runId, list] of byRun) {
      assert.ok(activeById.has(runId), `job for a run that is not active: ${runId}`);
      assert.equal(list.length, 1, `run ${runId} got ${list.length} jobs`);
      assertEngineJob(list[0], activeById.get(runId));
    }
    assert.equal(byRun.size, needing, 'every run that needs a wake-up got a job');
    assert.equal(new Set(added.map((j) => j.payload.messageId)).size, needing, 'message ids are unique');
  });

  test('a replica killed mid-batch: its batch is leased again after the batch lease, no run missed', async () => {
    const active = await seedRuns(db, { active: 2000 });
    // The first replica enqueues its first batch, then holds the lease without completing.
    const slow = spawnClient(clientConfig('deploy-kill', 'slow', { maxRuns: 100, holdAfterEnqueueMs: 120_000 }));
    const held = await slow.waitFor('holding');
    slow.kill('SIGKILL');
    await slow.exited;
    const killedAt = Date.now();

    const others = [1, 2].map((i) => spawnClient(clientConfig('deploy-kill', `healthy-${i}`, { maxRuns: 100 })));
    const results = await Promise.all(others.map(resultOf));
    for (const r of results) assert.equal(r.outcome.status, 'done');

    const releases = results.flatMap((r) => r.batches).filter((b) => b.batchId === held.batchId);
    assert.equal(releases.length, 1, 'the held batch was handed out again exactly once');
    assert.ok(releases[0].fence > held.fence, 'with a higher fence');
    assert.ok(Date.now() - killedAt >= 1000, 'not before the lease could expire');

    const { byRun } = newJobsByRun([], await jobs(db));
    const heldRuns = new Set(held.runIds);
    for (const run of active) {
      const n = byRun.get(run.runId)?.length ?? 0;
      assert.ok(n >= 1, `run ${run.runId} was missed`);
      if (n > 1) assert.ok(heldRuns.has(run.runId), `run ${run.runId} outside the killed batch got ${n} jobs`);
    }
    assert.equal(byRun.size, active.length);
  });

  test('blocked heartbeats: the lease lapses, the service declares the instance gone, and once heartbeats get through the client fences itself, registers anew, and its late complete is refused', async () => {
    const active = await seedRuns(db, { active: 300 });
    const p = makePool(service.dbUrl, 2);
    let blockedInstance = null;
    // A network that silently drops the heartbeats of one instance (they time out), until the
    // service has declared it dead.
    const fetchDroppingHeartbeats = (url, init) => {
      if (blockedInstance && String(url).includes(`/instances/${blockedInstance}/heartbeat`)) {
        return new Promise((_, reject) => init.signal.addEventListener('abort', () => reject(init.signal.reason)));
      }
      return fetch(url, init);
    };
    const builtIn = graphileEnqueuer({ pool: p });
    let fencedSeen;
    const fenced = new Promise((resolve) => {
      fencedSeen = resolve;
    });
    let first = true;
    let lapsed = 0;
    let onFencedCalls = 0;
    const client = startRecovery({
      url: service.url,
      namespace: NAMESPACE,
      registrationSecret: SECRET,
      deploymentId: 'deploy-fence',
      name: 'partitioned',
      maxRuns: 100,
      fetch: fetchDroppingHeartbeats,
      onFenced: () => onFencedCalls++,
      logger: false,
      enqueue: async (runs) => {
        const result = await builtIn(runs);
        if (first) {
          first = false;
          blockedInstance = client.instanceId; // from now on this instance's heartbeats vanish
          await fenced;
          await new Promise((r) => setTimeout(r, 1000)); // well past the lease, on any clock
        }
        return result;
      },
    });
    const registered = [];
    const refused = [];
    client.on('registered', (e) => registered.push(e));
    client.on('fenced', (e) => fencedSeen(e));
    // The lease lapsed on the client's clock; heal the network once the service declared it dead.
    client.on('lease-lapsed', async (e) => {
      lapsed++;
      for (let i = 0; i < 200; i++) {
        const { rows } = await p.query('SELECT state FROM rollcall.instances WHERE id = $1', [e.instanceId]);
        if (rows[0]?.state === 'dead') break;
        await new Promise((r) => setTimeout(r, 100));
      }
      blockedInstance = null;
    });
    client.on('complete-refused', (e) => refused.push(e));
    try {
      const outcome = await client.recovered;
      assert.equal(outcome.status, 'done');
      const fence = await fenced;
      assert.equal(fence.reason, 'gone');
      assert.equal(lapsed, 1, 'the lease lapsed first, and the instance was kept until the service said gone');
      assert.equal(fence.instanceId, registered[0].instanceId);
      assert.equal(registered.length, 2, 'registered again');
      assert.notEqual(registered[1].instanceId, registered[0].instanceId, 'as a new instance');
      assert.equal(registered[1].previousInstanceId, registered[0].instanceId);
      assert.equal(refused.length, 1);
      assert.ok([409, 410].includes(refused[0].status), `late complete answered ${refused[0].status}`);
      assert.equal(client.stats.fencedEvents, 1);
      const { byRun } = newJobsByRun([], await jobs(db));
      for (const run of active) assert.ok(byRun.has(run.runId), `run ${run.runId} was missed`);
    } finally {
      await client.stop();
      await p.end();
    }
    assert.equal(onFencedCalls, 1);
  });

  test("a live replica's heartbeat picks up a dead peer's in-flight runs (takeover)", async () => {
    const active = await seedRuns(db, { active: 200 });
    const owned = active[7].runId;
    // Replica A executes `owned` for as long as it lives; the boot epoch must leave that run alone.
    const a = spawnClient(clientConfig('deploy-takeover', 'a', { inFlight: [owned], stayAlive: true }));
    await a.waitFor('recovered');
    const p = makePool(service.dbUrl, 2);
    const b = startRecovery({
      url: service.url,
      namespace: NAMESPACE,
      registrationSecret: SECRET,
      deploymentId: 'deploy-takeover',
      name: 'b',
      pool: p,
      logger: false,
    });
    try {
      assert.equal((await b.recovered).status, 'done');
      let { byRun } = newJobsByRun([], await jobs(db));
      assert.equal(byRun.has(owned), false, 'a run a live replica executes is not re-driven');
      assert.equal(byRun.size, active.length - 1);

      const takeover = new Promise((resolve) =>
        b.on('batch', (e) => {
          if (e.epochKind === 'takeover') resolve(e);
        }),
      );
      a.kill('SIGKILL');
      await a.exited;
      const batch = await Promise.race([
        takeover,
        new Promise((_, reject) => setTimeout(() => reject(new Error('no takeover batch within 20 s')), 20_000)),
      ]);
      assert.equal(batch.runs, 1);
      await new Promise((r) => setTimeout(r, 200));
      ({ byRun } = newJobsByRun([], await jobs(db)));
      assert.equal(byRun.get(owned)?.length, 1, 'the dead replica’s run was re-driven once');
      assertEngineJob(byRun.get(owned)[0], active[7]);
    } finally {
      await b.stop();
      await p.end();
    }
  });

  test('the built-in enqueuer writes the job the engine itself writes, keyed by its message id the same way', async () => {
    const [run] = await seedRuns(db, { active: 1 });
    const previous = process.env.WORKFLOW_LOCAL_BASE_URL;
    // The engine's queue runner waits for its executor at this URL; nobody listens, so its
    // workers never start and the job stays where the engine put it.
    process.env.WORKFLOW_LOCAL_BASE_URL = `http://127.0.0.1:${await freePort()}`;
    const world = createWorld({ connectionString: service.dbUrl, jobPrefix: 'workflow_', queueConcurrency: 1 });
    const p = makePool(service.dbUrl, 2);
    try {
      await world.queue(`__wkf_workflow_${run.workflowName}`, { runId: run.runId });
      await graphileEnqueuer({ pool: p })([{ ...run, queueName: `__wkf_workflow_${run.workflowName}` }]);
      const [engine, ours] = await jobs(db);
      assert.equal(ours.task, engine.task);
      assert.equal(ours.max_attempts, engine.max_attempts);
      assert.equal(ours.job_queue_id, engine.job_queue_id);
      assert.equal(ours.priority, engine.priority);
      assert.deepEqual(ours.flags, engine.flags);
      assert.deepEqual(Object.keys(ours.payload).sort(), Object.keys(engine.payload).sort());
      assert.equal(ours.payload.id, engine.payload.id);
      assert.equal(ours.payload.attempt, engine.payload.attempt);
      assert.equal(ours.payload.data, engine.payload.data, 'byte-identical message body');
      assert.equal(engine.key, engine.payload.messageId, 'the engine keys its jobs by message id');
      assert.equal(ours.key, ours.payload.messageId, 'and so does recovery, with a fresh one');
      assert.notEqual(ours.key, engine.key);
    } finally {
      await world.close();
      await p.end();
      if (previous === undefined) delete process.env.WORKFLOW_LOCAL_BASE_URL;
      else process.env.WORKFLOW_LOCAL_BASE_URL = previous;
    }
  });

  test("a run handed out with its owner's message id gets exactly that id and no key; the owner's locked job is left alone", async () => {
    const [run] = await seedRuns(db, { active: 1 });
    const owner = 'msg_01JAAAAAAAAAAAAAAAAAAAAAAB';
    const ownerPayload = workflowMessagePayload(run, owner);
    await db.query(`SELECT graphile_worker.add_job('workflow_flows', $1::json, max_attempts => 3, job_key => $2)`, [
      JSON.stringify(ownerPayload),
      owner,
    ]);
    // Its worker died while it ran the job: the lock stays until someone releases it.
    await db.query(`UPDATE graphile_worker._private_jobs SET locked_at = now(), locked_by = 'worker-dead', attempts = 1`);
    const [ownerJob] = await jobs(db);
    const p = makePool(service.dbUrl, 2);
    try {
      await graphileEnqueuer({ pool: p })([{ ...run, messageId: owner }]);
    } finally {
      await p.end();
    }
    const all = await jobs(db);
    assert.equal(all.length, 2, 'a second job, not a replacement');
    assert.deepEqual(all[0], ownerJob, "the owner's job is untouched, field by field");
    const redrive = all[1];
    assert.equal(redrive.key, null, 'no key');
    assert.equal(redrive.locked_by, null);
    assert.equal(MessageData.parse(redrive.payload).messageId, owner, 'the same message id');
    assertEngineJob({ ...redrive, key: redrive.payload.messageId }, run);
  });

  test("startWorldWithoutRecovery starts the engine's queue without its re-enqueue; start() re-enqueues", async () => {
    const active = await seedRuns(db, { active: 45, terminal: 10 });
    const previous = process.env.WORKFLOW_LOCAL_BASE_URL;
    process.env.WORKFLOW_LOCAL_BASE_URL = `http://127.0.0.1:${await freePort()}`;
    const quiet = createWorld({ connectionString: service.dbUrl, jobPrefix: 'workflow_', queueConcurrency: 1 });
    const loud = createWorld({ connectionString: service.dbUrl, jobPrefix: 'workflow_', queueConcurrency: 1 });
    const log = console.log;
    try {
      await startWorldWithoutRecovery(quiet);
      assert.equal((await jobs(db)).length, 0, 'no job enqueued');
      const listed = await quiet.runs.list({ status: 'pending', resolveData: 'none' });
      assert.ok(listed.data.length > 0, 'runs.list is itself again afterwards');
      console.log = () => {}; // the engine announces its re-enqueue
      await loud.start();
      console.log = log;
      const { byRun } = newJobsByRun([], await jobs(db));
      assert.equal(byRun.size, active.length, "the engine's own start() re-enqueues every active run");
    } finally {
      console.log = log;
      await quiet.close();
      await loud.close();
      if (previous === undefined) delete process.env.WORKFLOW_LOCAL_BASE_URL;
      else process.env.WORKFLOW_LOCAL_BASE_URL = previous;
    }
  });

  test("trackWorld: the engine's queue handler reports the run it executes and the message that delivered it", async () => {
    const world = createWorld({ connectionString: service.dbUrl, jobPrefix: 'workflow_', queueConcurrency: 1 });
    const tracker = createTracker();
    trackWorld(world, tracker);
    let seen = null;
    const handler = world.createQueueHandler('__wkf_workflow_', async (message) => {
      seen = { message, inFlight: tracker.entries() };
    });
    try {
      const res = await handler(
        new Request('http://127.0.0.1/.well-known/workflow/v1/flow', {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'x-vqs-queue-name': '__wkf_workflow_checkout',
            'x-vqs-message-id': 'msg_01JABCDEFGHJKMNPQRSTVWXYZ0',
            'x-vqs-message-attempt': '1',
          },
          body: JSON.stringify({ runId: 'wrun_01TRACKED' }),
        }),
      );
      assert.equal(res.status, 200, await res.clone().text());
      assert.deepEqual(
        seen.inFlight,
        [{ runId: 'wrun_01TRACKED', messageId: 'msg_01JABCDEFGHJKMNPQRSTVWXYZ0' }],
        'in flight with the message id of its delivery while the handler runs',
      );
      assert.deepEqual(tracker.list(), [], 'and not after');
    } finally {
      await world.close();
    }
  });
});
