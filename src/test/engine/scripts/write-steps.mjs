// Writes one run with a completed step and, on the 5.0 line, one with a failed step, through the
// installed engine's own `world.events.create`, with the event data the runtime sends
// (`@workflow/core`'s step executor: step_completed {stepName, workflowName, result}, result a
// Uint8Array of the serialized return value; step_failed {stepName, error}, error a Uint8Array of
// the serialized error). A test then holds the bytes Rollcall builds from the step rows against
// the events the engine wrote.
//
//   node write-steps.mjs <workflowName>
//
// Run it with a fixture's install directory as the working directory (as enqueue-run.mjs).
// Environment: WORKFLOW_POSTGRES_URL (required). Prints one JSON line: {"completed": runId,
// "failed": runId or null}.

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [workflowName] = process.argv.slice(2);
if (!workflowName || process.argv.length !== 3 || !process.env.WORKFLOW_POSTGRES_URL) {
  console.error('usage: WORKFLOW_POSTGRES_URL=… node write-steps.mjs <workflowName>');
  process.exit(2);
}
const requireFromCwd = createRequire(path.join(process.cwd(), 'package.json'));
const load = (specifier) => import(pathToFileURL(requireFromCwd.resolve(specifier)).href);
const { createWorld } = await load('@workflow/world-postgres');
const { version } = JSON.parse(
  readFileSync(path.join(process.cwd(), 'node_modules/@workflow/world-postgres/package.json'), 'utf8'),
);
const beta = version.startsWith('5.');

const world = createWorld();
const bytes = (text) => new TextEncoder().encode(text);

/** A run, started, with one step created and started; returns [runId, stepId, stepName]. */
async function runWithStartedStep(label) {
  const created = await world.events.create('', {
    eventType: 'run_created',
    eventData: {
      deploymentId: 'postgres',
      workflowName,
      input: beta ? bytes(`input of ${label}`) : [label],
    },
  });
  const runId = created.run?.runId ?? created.event.runId;
  await world.events.create(runId, { eventType: 'run_started' });
  const stepId = `step_${label}_${Date.now()}`;
  const stepName = `step//./workflows/orders//${label}`;
  await world.events.create(runId, {
    eventType: 'step_created',
    correlationId: stepId,
    eventData: { stepName, input: beta ? bytes(`input of ${stepId}`) : [stepId] },
  });
  await world.events.create(runId, { eventType: 'step_started', correlationId: stepId });
  return [runId, stepId, stepName];
}

let exitCode = 0;
try {
  const [completed, stepId, stepName] = await runWithStartedStep('ship');
  await world.events.create(completed, {
    eventType: 'step_completed',
    correlationId: stepId,
    eventData: {
      stepName,
      workflowName,
      result: beta ? bytes('devl{"shipped":true,"parcels":[1,2,3]}') : [{ shipped: true }, 'é'],
    },
  });
  let failed = null;
  if (beta) {
    const [runId, failedStep, failedName] = await runWithStartedStep('charge');
    await world.events.create(runId, {
      eventType: 'step_failed',
      correlationId: failedStep,
      eventData: { stepName: failedName, error: bytes('devl{"message":"card declined"}') },
    });
    failed = runId;
  }
  console.log(JSON.stringify({ completed, failed }));
} catch (err) {
  console.error(err?.stack ?? String(err));
  exitCode = 1;
} finally {
  await world.close?.();
}
process.exitCode = exitCode;
setTimeout(() => process.exit(exitCode || 3), 10_000).unref();
