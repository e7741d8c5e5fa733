// Enqueues the workflow message of one run exactly as the engine does, with the engine's own code:
// `createWorld()` of @workflow/world-postgres, then `world.queue(<prefix><name>, { runId })`, the
// call `reenqueueActiveRuns` of @workflow/world makes for every active run when a world starts.
// The package's queue encodes the message (dist/message.js) and adds the graphile-worker job
// (task `<jobPrefix>flows`, job key = message id, max attempts 3). No worker is started.
//
//   node enqueue-run.mjs <runId> <workflowName>
//
// Run it with the fixture's install directory (target/engine-fixture or
// target/engine-beta-fixture) as the working directory: the packages are resolved from there, so
// one script serves every installed engine version. Environment, read by the engine itself:
//   WORKFLOW_POSTGRES_URL         the database (required)
//   WORKFLOW_POSTGRES_JOB_PREFIX  the task identifier prefix (default `workflow_`)
//   WORKFLOW_QUEUE_NAMESPACE      the queue topic namespace (default none)
// Prints one JSON line: {"messageId", "queueName", "taskIdentifier"}.

import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [runId, workflowName] = process.argv.slice(2);
if (!runId || !workflowName || process.argv.length !== 4) {
  console.error('usage: node enqueue-run.mjs <runId> <workflowName>');
  process.exit(2);
}
if (!process.env.WORKFLOW_POSTGRES_URL) {
  console.error('WORKFLOW_POSTGRES_URL is not set');
  process.exit(2);
}

// Resolve the packages from the working directory, not from this file's location.
const requireFromCwd = createRequire(path.join(process.cwd(), 'package.json'));
const load = (specifier) => import(pathToFileURL(requireFromCwd.resolve(specifier)).href);

/** A loopback port that nothing listens on right now. */
function closedLoopbackPort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

// The engine's queue starts its graphile-worker runner on first use, but defers it while the
// workflow executor (WORKFLOW_LOCAL_BASE_URL) is a loopback address that refuses connections, and
// close() cancels the deferred start. Pointing it at a closed port therefore enqueues without ever
// running a worker, which would otherwise pick the job up (and fail to deliver it).
process.env.WORKFLOW_LOCAL_BASE_URL = `http://127.0.0.1:${await closedLoopbackPort()}`;

const { createWorld } = await load('@workflow/world-postgres');
const { getQueueTopicPrefix, resolveQueueNamespace } = await load('@workflow/world');

// createWorld() with no argument reads WORKFLOW_POSTGRES_URL and WORKFLOW_POSTGRES_JOB_PREFIX; the
// queue reads WORKFLOW_QUEUE_NAMESPACE through resolveQueueNamespace.
const world = createWorld();
let exitCode = 0;
try {
  const queueName = `${getQueueTopicPrefix('workflow', resolveQueueNamespace(undefined))}${workflowName}`;
  const { messageId } = await world.queue(queueName, { runId });
  const taskIdentifier = `${process.env.WORKFLOW_POSTGRES_JOB_PREFIX || 'workflow_'}flows`;
  console.log(JSON.stringify({ messageId, queueName, taskIdentifier }));
} catch (err) {
  console.error(err?.stack ?? String(err));
  exitCode = 1;
} finally {
  try {
    await world.close();
  } catch (err) {
    console.error('closing the world failed:', err?.stack ?? String(err));
    exitCode = exitCode || 1;
  }
}
process.exitCode = exitCode;
// Everything is closed; a handle that still keeps the process alive is a bug worth seeing.
setTimeout(() => {
  console.error('enqueue-run: handles still open 10 s after close; exiting');
  process.exit(exitCode || 3);
}, 10_000).unref();
