// Rollcall wired into this app with the client's programmatic API, as clients/node/README.md
// shows: the engine's queue handlers report what they execute, the queue starts without the
// engine's own boot recovery, and the client takes part in the deploy's shared recovery, heartbeats
// the in-flight set and leaves on SIGTERM.
import { createTracker, startRecovery, startWorldWithoutRecovery, trackWorld } from '@rollcall/client';
import pg from 'pg';

export async function wireRollcall(world, journal) {
  const tracker = createTracker();
  trackWorld(world, tracker);
  await startWorldWithoutRecovery(world);
  const pool = new pg.Pool({ connectionString: process.env.WORKFLOW_POSTGRES_URL, max: 2 });
  pool.on('error', (error) => journal('pool-error', { message: error.message }));
  const recovery = startRecovery({
    url: process.env.ROLLCALL_URL,
    namespace: process.env.ROLLCALL_NAMESPACE,
    registrationSecret: process.env.ROLLCALL_SECRET,
    deploymentId: process.env.ROLLCALL_DEPLOYMENT_ID,
    name: process.env.ROLLCALL_NAME,
    pool,
    jobPrefix: process.env.WORKFLOW_POSTGRES_JOB_PREFIX ?? 'workflow_',
    inFlight: tracker,
    handleSignals: 'SIGTERM',
    logger: false,
  });
  recovery.on('registered', ({ instanceId }) => journal('registered', { instanceId }));
  recovery.on('batch', (b) =>
    journal('batch', { epochKind: b.epochKind, runIds: b.runs.map((r) => r.runId) }),
  );
  recovery.on('stopped', () => journal('left'));
  return recovery;
}
