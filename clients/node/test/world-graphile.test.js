// The zero-code wiring with graphile-worker 0.18.0, the newest release, under world-postgres
// 5.0.0-beta.29 (an npm override of the 0.16.6 it pins). From 0.17 a worker pool takes and locks
// every job under the pool's one id, not under each worker's: the world module learns that id the
// same way (the statement that takes a job), the service keeps it, and a process's end releases
// its jobs at once. Its own file and service: graphile-worker 0.18's migrations mark the schema as
// one 0.16 workers must not run on.
import { describe } from 'node:test';
import { installGraphile18App } from './support/engines.js';
import { withService } from './support/suite.js';
import { WORLD_MODULE, zeroCodeLineTest } from './support/world-line.js';

let service;
let db;
// The production lease, as in world.test.js.
withService(
  (s, d) => {
    service = s;
    db = d;
  },
  { ROLLCALL_LEASE_TTL: '10s' },
);

describe('the zero-code world module on graphile-worker 0.18', { timeout: 600_000 }, () => {
  zeroCodeLineTest(
    {
      engine: '5.0.0-beta.29',
      graphile: '0.18.0',
      loader: 'import',
      appDir: installGraphile18App,
      target: WORLD_MODULE,
      queueWorkers: 1,
    },
    0,
    () => ({ service, db }),
  );
});
