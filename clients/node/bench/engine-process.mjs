// One replica doing the engine's OWN boot recovery, for comparison: @workflow/world-postgres's
// `start()` is `queue.start()` then `reenqueueActiveRuns(runs, queue, …)` (from @workflow/world).
// The queue is started first (without the re-enqueue) so that only the recovery is timed, and
// WORKFLOW_LOCAL_BASE_URL points at a port nobody listens on so the engine's workers wait for
// their executor and never run the jobs being counted.
// Configured by ROLLCALL_ENGINE_CONFIG: {dbUrl}. Waits for "go" on stdin; prints JSON lines.
import { createInterface } from 'node:readline';
import { reenqueueActiveRuns } from '@workflow/world';
import { createWorld } from '@workflow/world-postgres';
import { startWorldWithoutRecovery } from '../src/index.js';

const config = JSON.parse(process.env.ROLLCALL_ENGINE_CONFIG);
const out = (event, fields) => process.stdout.write(JSON.stringify({ event, t: Date.now(), ...fields }) + '\n');

const world = createWorld({ connectionString: config.dbUrl, jobPrefix: 'workflow_', queueConcurrency: 1, maxPoolSize: 2 });
await startWorldWithoutRecovery(world);
out('ready', {});
for await (const line of createInterface({ input: process.stdin })) if (line.trim() === 'go') break;
process.stdin.destroy();

const started = performance.now();
const log = console.log;
console.log = () => {}; // "Re-enqueued N active run(s) on startup"
await reenqueueActiveRuns(world.runs, world.queue, 'world-postgres');
console.log = log;
const elapsedMs = performance.now() - started;
await world.close();
out('result', { elapsedMs });
// The engine leaves a handle open after close() (its executor wait loop); do not wait for it.
process.exit(0);
