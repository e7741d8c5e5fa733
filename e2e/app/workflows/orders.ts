// The example application's workflows: slow steps (a kill lands mid-step), a sleep, and a hook
// the caller resumes. Every step execution is written to the process's journal (see server.mjs),
// so a test can tell how often a step really ran, in which process, and when.
import { createHook, getStepMetadata, getWorkflowMetadata, sleep } from 'workflow';

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
