// The example application's workflows: slow steps (a kill lands mid-step), a sleep, a hook the
// caller resumes, runs of many short steps (a kill lands between the engine's writes far more
// often) and a step that fails for good and is handled. Every step execution is written to the
// process's journal (see server.mjs), so a test can tell how often a step really ran, in which
// process, and when.
import { createHook, FatalError, getStepMetadata, getWorkflowMetadata, sleep } from 'workflow';

function journal(event: string, fields: Record<string, unknown>) {
  const write = (globalThis as { rollcallExampleJournal?: (e: string, f: object) => void })
    .rollcallExampleJournal;
  write?.(event, fields);
}

async function slowStep(name: string, ms: number) {
  'use step';
  const { workflowRunId } = getWorkflowMetadata();
  const { stepId, attempt } = getStepMetadata();
  journal('step-start', { runId: workflowRunId, stepId, step: name, attempt });
  await new Promise((resolve) => setTimeout(resolve, ms));
  journal('step-end', { runId: workflowRunId, stepId, step: name, attempt });
  return `${name} done`;
}

/** A step whose body ends by failing for good (no retry): the card is declined. */
async function declinedStep(ms: number) {
  'use step';
  const { workflowRunId } = getWorkflowMetadata();
  const { stepId, attempt } = getStepMetadata();
  journal('step-start', { runId: workflowRunId, stepId, step: 'charge-card', attempt });
  await new Promise((resolve) => setTimeout(resolve, ms));
  journal('step-end', { runId: workflowRunId, stepId, step: 'charge-card', attempt });
  throw new FatalError('card declined');
}

/** Three slow steps in a row. */
export async function fulfil(stepMs: number) {
  'use workflow';
  const a = await slowStep('reserve', stepMs);
  const b = await slowStep('charge', stepMs);
  const c = await slowStep('ship', stepMs);
  return [a, b, c];
}

/** A slow step, a sleep, another slow step. */
export async function remind(stepMs: number, sleepMs: number) {
  'use workflow';
  const a = await slowStep('draft', stepMs);
  await sleep(sleepMs);
  const b = await slowStep('send', stepMs);
  return [a, b];
}

/** A slow step, then parked on a hook until the caller resumes it, then another slow step. */
export async function approve(stepMs: number, token: string) {
  'use workflow';
  const a = await slowStep('request', stepMs);
  const hook = createHook<{ approved: boolean }>({ token });
  const answer = await hook;
  const b = await slowStep(answer.approved ? 'approved' : 'rejected', stepMs);
  return [a, b];
}

/** `count` short steps one after the other: most of the run is the engine's own writes. */
export async function chain(stepMs: number, count: number) {
  'use workflow';
  const done: string[] = [];
  for (let i = 0; i < count; i++) {
    done.push(await slowStep(`link-${i}`, stepMs));
  }
  return done.length;
}

/** `width` short steps at once, then `width` more at once. */
export async function fanOut(stepMs: number, width: number) {
  'use workflow';
  const picked = await Promise.all(
    Array.from({ length: width }, (_, i) => slowStep(`pick-${i}`, stepMs)),
  );
  const packed = await Promise.all(
    Array.from({ length: width }, (_, i) => slowStep(`pack-${i}`, stepMs)),
  );
  return picked.length + packed.length;
}

/** A step that fails for good, caught by the workflow, which then refunds in a step of its own. */
export async function refund(stepMs: number) {
  'use workflow';
  try {
    await declinedStep(stepMs);
    return 'charged';
  } catch {
    return await slowStep('refund', stepMs);
  }
}
