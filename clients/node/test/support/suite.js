// The setting of every test file that runs against the real service: the packaged service with
// its embedded PostgreSQL, the engine's schemas built by the engine's own setup program, a pool on
// that database; and in the end every child process killed, the pool closed, the service stopped.
import { after, before } from 'node:test';
import { pool as makePool } from './db.js';
import { killAll } from './processes.js';
import { setUpEngineSchemas, startService, waitReady } from './service.js';

/**
 * Registers the file's before/after hooks; `ready(service, db)` is called once both are up.
 * `env` overrides the service's settings (see startService).
 */
export function withService(ready, env = {}) {
  let service;
  let db;
  before(async () => {
    service = await startService({ env });
    await setUpEngineSchemas(service.dbUrl);
    await waitReady(service);
    db = makePool(service.dbUrl);
    ready(service, db);
  });
  after(async () => {
    killAll();
    await db?.end();
    await service?.stop();
  });
}
