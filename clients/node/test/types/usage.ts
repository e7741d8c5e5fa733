// Compiled (never run) by `npm test`, with the code blocks of the docs (snippets.mjs): the wiring must type-check against index.d.ts.
import pg from 'pg';
import { createWorld } from '@workflow/world-postgres';
import { reenqueueActiveRuns } from '@workflow/world';
import {
  RollcallError,
  createTracker,
  startRecovery,
  startWorldWithoutRecovery,
  trackWorld,
  type InFlightEntry,
  type RecoveryOutcome,
} from '@rollcall/client';
import createRollcallWorld, { rollcallClient, worldSettings } from '@rollcall/client/world';

const pool = new pg.Pool({ connectionString: process.env.WORKFLOW_POSTGRES_URL });
const world = createWorld();
const tracker = createTracker();
trackWorld(world, tracker);

const recovery = startRecovery({
  url: 'http://127.0.0.1:8080',
  namespace: 'shop',
  registrationSecret: 'secret',
  deploymentId: 'rev-42',
  pool,
  inFlight: tracker,
  fallback: 'local',
  localRecovery: () => reenqueueActiveRuns(world.runs, world.queue, 'world-postgres'),
  handleSignals: 'SIGTERM',
  onFenced: (e) => console.warn(e.instanceId, e.reason),
});
recovery.on('batch', (b) => console.log(b.batchId, b.enqueued));
recovery.on('complete-refused', (e) => console.log(e.status, e.error.type));
recovery.on('leave-failed', (e) => console.warn(e.instanceId, e.error.gone, recovery.stats.leaveFailures));
const stop: Promise<void> = recovery.stop();

async function main() {
  await startWorldWithoutRecovery(world);
  const outcome: RecoveryOutcome = await recovery.recovered;
  if (outcome.status === 'failed') console.error(outcome.error.detail);
  const n: number = recovery.stats.runsEnqueued;
  await tracker.wrap('wrun_1', async () => n);
  await tracker.wrap('wrun_2', async () => n, 'msg_01');
  const entries: InFlightEntry[] = tracker.entries();
  const zeroCode = createRollcallWorld();
  await zeroCode.start();
  const client = rollcallClient();
  if (client) console.log(client.instanceId, entries.length, worldSettings(process.env).deploymentId);
}

startRecovery({
  url: 'x',
  namespace: 'n',
  registrationSecret: 's',
  deploymentId: 'd',
  pool,
  inFlight: () => ['wrun_1', { runId: 'wrun_2', messageId: 'msg_1' }],
});

startRecovery({
  url: 'x',
  namespace: 'n',
  registrationSecret: 's',
  deploymentId: 'd',
  enqueue: async (runs, { batch }) => ({ failedRunIds: runs.filter(() => batch.fence > 1).map((r) => r.runId) }),
});

const e: unknown = null;
if (e instanceof RollcallError && e.retryable) console.log(e.status, e.slug, e.retryAfterMs ?? 'no hint');
void main;
void stop;
