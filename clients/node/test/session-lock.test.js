// The session lock against the REAL service and its PostgreSQL: the client holds its lock in a
// session of its own, reports it, takes it again after its session is terminated (without being
// declared dead), reports a lock it cannot hold (a key collision, a connection multiplexed like a
// transaction-pooling proxy does), and a process killed with SIGKILL is declared dead on the proof
// of its lost session long before its lease runs out.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { SessionLock, openSession } from '../src/session-lock.js';
import { startRecovery } from '../src/index.js';
import { pool as makePool } from './support/db.js';
import { killAll, spawnClient } from './support/processes.js';
import { NAMESPACE, SECRET, startServiceWithEngine } from './support/service.js';

const CLASS_ID = 0x52434c4c;
const silent = { info() {}, warn() {}, error() {}, debug() {} };

let service;
let db;

before(async () => {
  // A lease far longer than the test: only the session can prove a death here.
  service = await startServiceWithEngine({
    env: {
      ROLLCALL_LEASE_TTL: '60s',
      ROLLCALL_HEARTBEAT_INTERVAL: '500ms',
      ROLLCALL_LIVENESS_SESSION_GRACE: '1s',
      ROLLCALL_LIVENESS_RESTART_GRACE: '0s',
    },
  });
  db = makePool(service.dbUrl);
});

after(async () => {
  killAll();
  await db?.end();
  await service?.stop();
});

const until = async (what, check, ms = 20_000) => {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
};

const instance = async (id) =>
  (await db.query('SELECT state, end_reason, session_lock, session_pid FROM rollcall.instances WHERE id = $1', [id]))
    .rows[0];

const holder = async (objId) =>
  (
    await db.query(
      `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2
         AND classid = $1::int::oid AND objid = $2::int::oid`,
      [CLASS_ID, objId],
    )
  ).rows[0]?.pid ?? null;

const options = (name, extra = {}) => ({
  url: service.url,
  namespace: NAMESPACE,
  registrationSecret: SECRET,
  deploymentId: 'session-lock',
  name,
  enqueue: async () => ({ failedRunIds: [] }),
  connectionString: service.dbUrl,
  logger: false,
  ...extra,
});

describe('the session lock', () => {
  test('is held in a session of its own, seen by the service, and taken again after pg_terminate_backend', async () => {
    const client = startRecovery(options('terminated'));
    try {
      const id = await until('registered', () => client.instanceId);
      const row = await until('held and seen', async () => {
        const r = await instance(id);
        return r.session_lock === 'held' ? r : null;
      });
      const { rows } = await db.query('SELECT rollcall.session_lock_objid($1) AS objid', [id]);
      const objId = rows[0].objid;
      assert.equal(await holder(objId), row.session_pid);
      assert.equal(client.sessionLock, 'held');

      await db.query('SELECT pg_terminate_backend($1)', [row.session_pid]);
      const again = await until('held by a new backend', async () => {
        const pid = await holder(objId);
        return pid && pid !== row.session_pid ? pid : null;
      });
      await until('reported again', async () => (await instance(id)).session_pid === again);
      // Well past the loss confirm (1 s) and several checks: it was never declared dead.
      await new Promise((r) => setTimeout(r, 3_000));
      assert.equal((await instance(id)).state, 'live');
      assert.equal(client.stats.fencedEvents, 0);
    } finally {
      await client.stop();
    }
  });

  test('a process killed with SIGKILL is declared dead on its lost session, long before its 60 s lease', async () => {
    const child = spawnClient({
      url: service.url,
      dbUrl: service.dbUrl,
      namespace: NAMESPACE,
      secret: SECRET,
      deploymentId: 'session-lock',
      name: 'killed',
      stayAlive: true,
      sessionLock: true,
    });
    const registered = await child.waitFor('registered');
    const id = registered.instanceId;
    await until('held', async () => (await instance(id)).session_lock === 'held');
    // Past the session grace (1 s): the fast path is armed.
    await new Promise((r) => setTimeout(r, 1_500));
    const killed = Date.now();
    child.kill('SIGKILL');
    const dead = await until('declared dead', async () => {
      const r = await instance(id);
      return r.state === 'dead' ? r : null;
    });
    assert.equal(dead.end_reason, 'session-lost');
    assert.ok(Date.now() - killed < 10_000, `declared dead ${Date.now() - killed} ms after the kill`);
  });

  test('a key someone else holds is reported unavailable, and the holder keeps it', async () => {
    const keys = { classId: CLASS_ID, objId: 123_456_789 };
    const other = await openSession(pg.Client, service.dbUrl);
    try {
      await other.query('SELECT pg_advisory_lock($1::int, $2::int)', [keys.classId, keys.objId]);
      const lock = new SessionLock({ connect: () => openSession(pg.Client, service.dbUrl), keys, log: silent });
      await lock.start();
      assert.equal(lock.state, 'unavailable');
      assert.equal(lock.reason, 'taken');
      assert.deepEqual(lock.report(), { state: 'unavailable' });
      const { rows } = await other.query('SELECT pg_backend_pid() AS pid');
      assert.equal(await holder(keys.objId), rows[0].pid);
      await lock.close();
    } finally {
      await other.end();
    }
  });

  test('a connection whose transactions land on different backends (transaction pooling) is reported unavailable', async () => {
    // What a transaction-mode pooler does: each statement may run on another server connection.
    const servers = [await openSession(pg.Client, service.dbUrl), await openSession(pg.Client, service.dbUrl)];
    let next = 0;
    const multiplexed = {
      query: (text, values) => servers[next++ % servers.length].query(text, values),
      on() {},
      end: async () => {},
    };
    try {
      const keys = { classId: CLASS_ID, objId: 987_654_321 };
      const lock = new SessionLock({ connect: async () => multiplexed, keys, log: silent });
      await lock.start();
      assert.equal(lock.state, 'unavailable');
      assert.equal(lock.reason, 'pooled');
    } finally {
      for (const s of servers) await s.end();
    }
  });

  test('the check before each heartbeat reads the backend pid, not the lock table, and sees a backend that changed', async () => {
    // A session that a proxy moves to another server connection after the lock was taken.
    const servers = [await openSession(pg.Client, service.dbUrl), await openSession(pg.Client, service.dbUrl)];
    let on = 0;
    const sent = [];
    const moving = {
      query: (text, values) => {
        sent.push(text);
        return servers[on].query(text, values);
      },
      on() {},
      end: async () => {},
    };
    try {
      const keys = { classId: CLASS_ID, objId: 876_543_219 };
      const lock = new SessionLock({ connect: async () => moving, keys, log: silent });
      await lock.start();
      assert.equal(lock.state, 'held');
      sent.length = 0;
      await lock.verify();
      await lock.verify();
      assert.equal(lock.state, 'held');
      assert.equal(sent.length, 2);
      // pg_locks copies every session lock of the server: a fleet's beats must not read it.
      assert.ok(sent.every((text) => !/pg_locks/.test(text)), sent.join('\n'));

      on = 1;
      await lock.verify();
      assert.equal(lock.state, 'unavailable');
      assert.equal(lock.reason, 'pooled');
    } finally {
      for (const s of servers) await s.end();
    }
  });
});
