// The engine's tables as tests see them: seeding workflow runs, reading graphile-worker's jobs.
import pg from 'pg';

export const WORKFLOWS = ['checkout', 'send-invoice', 'nightly-report', 'onboard-user'];

export function pool(dbUrl, max = 4) {
  const p = new pg.Pool({ connectionString: dbUrl, max });
  // An idle client whose backend ends (the database shutting down at the end of a file) emits
  // 'error' on the pool; the next query reports any real problem, so this is not a failure.
  p.on('error', () => {});
  return p;
}

/**
 * Empties the runs table and graphile's jobs, then seeds `active` runs (pending and running,
 * alternately) interleaved with `terminal` ones (completed, failed, cancelled). Ids are
 * `wrun_` + 26 ULID characters that sort in creation order; `updated_at` lies an hour back so no
 * run counts as recently active; `firstId` shifts the ids, so that runs of one test are never
 * runs an earlier test's instances held. Returns the active runs as {runId, workflowName}.
 */
export async function seedRuns(db, { active, terminal = 0, firstId = 0 }) {
  await db.query('TRUNCATE workflow.workflow_runs');
  await db.query('DELETE FROM graphile_worker._private_jobs');
  const total = active + terminal;
  // Spread terminal runs evenly between active ones: run n is terminal when its slot says so.
  const { rows } = await db.query(
    `WITH slots AS (
       SELECT n, (floor(n::numeric * $1 / $2) <> floor((n + 1)::numeric * $1 / $2)) AS is_active
       FROM generate_series(0, $2::int - 1) AS n)
     INSERT INTO workflow.workflow_runs (id, status, name, deployment_id, created_at, updated_at)
     SELECT 'wrun_01' || lpad((n + $4::int)::text, 24, '0'),
            (CASE WHEN is_active THEN (CASE WHEN n % 2 = 0 THEN 'pending' ELSE 'running' END)
                  ELSE (ARRAY['completed', 'failed', 'cancelled'])[1 + n % 3] END)::workflow.status,
            ($3::text[])[1 + n % cardinality($3::text[])],
            'postgres',
            now() - interval '2 hours' + n * interval '1 millisecond',
            now() - interval '1 hour'
     FROM slots
     RETURNING id, name, status`,
    [active, total, WORKFLOWS, firstId],
  );
  const actives = rows
    .filter((r) => r.status === 'pending' || r.status === 'running')
    .map((r) => ({ runId: r.id, workflowName: r.name }));
  if (actives.length !== active) throw new Error(`seeded ${actives.length} active runs, wanted ${active}`);
  return actives;
}

/** Every graphile job, its task and its payload decoded as the engine would. */
export async function jobs(db) {
  const { rows } = await db.query(
    `SELECT j.id::bigint AS id, t.identifier AS task, j.payload::text AS payload, j.max_attempts, j.key,
            j.job_queue_id, j.run_at, j.attempts, j.revision, j.locked_at, j.locked_by, j.priority, j.flags
     FROM graphile_worker._private_jobs j JOIN graphile_worker._private_tasks t ON t.id = j.task_id
     ORDER BY j.id`,
  );
  return rows.map((r) => {
    const payload = JSON.parse(r.payload);
    let body = null;
    try {
      body = JSON.parse(Buffer.from(payload.data, 'base64').toString('utf8'));
    } catch {
      // not an engine message
    }
    return { ...r, id: Number(r.id), payload, body, runId: body?.runId ?? body?.workflowRunId ?? null };
  });
}

/** Adds jobs that are not recovery's: they must come out of a recovery pass exactly as they went in. */
export async function addForeignJobs(db, runs) {
  const wake = runs[0];
  const wakePayload = {
    attempt: 2,
    messageId: 'msg_01JZZZZZZZZZZZZZZZZZZZZZZZ',
    id: wake.workflowName,
    data: Buffer.from(JSON.stringify({ runId: wake.runId })).toString('base64'),
  };
  // A run's own wake-up job, keyed by its message id and due in an hour (a sleeping workflow).
  await db.query(
    `SELECT graphile_worker.add_job('workflow_flows', $1::json, run_at => now() + interval '1 hour',
             max_attempts => 3, job_key => $2)`,
    [JSON.stringify(wakePayload), wakePayload.messageId],
  );
  // A step job of another run, and a job of another application's task.
  const step = runs[1];
  await db.query(`SELECT graphile_worker.add_job('workflow_steps', $1::json, max_attempts => 3)`, [
    JSON.stringify({
      attempt: 1,
      messageId: 'msg_01JYYYYYYYYYYYYYYYYYYYYYYY',
      id: 'step//charge',
      data: Buffer.from(JSON.stringify({ workflowRunId: step.runId, stepId: 'step_1' })).toString('base64'),
    }),
  ]);
  await db.query(`SELECT graphile_worker.add_job('send_email', '{"to":"a@example.com"}'::json, queue_name => 'mail')`);
  return jobs(db);
}
