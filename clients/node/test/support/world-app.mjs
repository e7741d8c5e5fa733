// A world-postgres application wired to Rollcall by configuration alone: it loads the world module
// named by WORKFLOW_TARGET_WORLD exactly as the SDK's runtimes do, and stands in only for the
// workflow code behind the queue handlers.
//
//   WORKFLOW_LOADER=require  the 4.x runtime (@workflow/core 4.x createWorld): require() the module
//                            from the working directory and call createWorld() synchronously
//   WORKFLOW_LOADER=import   the 5.0 line (@workflow/world-testing's server, createWorldFromModule):
//                            import() the module and await createWorld()
//
// Like the 4.x runtime, it creates the world twice (getWorld and getWorldHandlers each create
// one): the queue handlers come from the second, start() is called on the first. The handlers
// serve the engine's deliveries on PORT, print {"event":"executing",runId,messageId} and then
// hold the execution until a line "finish <runId>" arrives on stdin (or forever). A line "close"
// finishes every execution, closes both worlds as an application managing its own shutdown does,
// prints {"event":"closed"} and lets the process end.
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const out = (event, fields) => process.stdout.write(JSON.stringify({ event, t: Date.now(), ...fields }) + '\n');
const target = process.env.WORKFLOW_TARGET_WORLD;

async function createWorld() {
  if (process.env.WORKFLOW_LOADER === 'require') {
    const mod = createRequire(join(process.cwd(), 'index.js'))(target);
    if (typeof mod === 'function') return mod();
    if (typeof mod.default === 'function') return mod.default();
    return mod.createWorld();
  }
  const mod = await import(target);
  return typeof mod.createWorld === 'function' ? await mod.createWorld() : await mod.default();
}

let worlds;
try {
  worlds = [await createWorld(), await createWorld()];
} catch (error) {
  out('create-failed', { message: error.message });
  process.exit(3);
}
const [world, handlers] = worlds;

const finishers = new Map();
const hold = (runId) => new Promise((resolve) => finishers.set(runId, resolve));
createInterface({ input: process.stdin }).on('line', (line) => {
  const [word, runId] = line.trim().split(/\s+/);
  if (word === 'finish') finishers.get(runId)?.();
  if (word === 'close') close();
});

async function close() {
  for (const finish of finishers.values()) finish();
  await world.close();
  out('world-closed', {});
  await handlers.close();
  server.close();
  process.stdin.destroy();
  out('closed', {});
}

const execute = async (message, meta) => {
  const runId = message.runId ?? message.workflowRunId;
  out('executing', { runId, messageId: meta?.messageId });
  await hold(runId);
  out('finished', { runId });
};
const routes = {
  '/.well-known/workflow/v1/flow': handlers.createQueueHandler('__wkf_workflow_', execute),
  '/.well-known/workflow/v1/step': handlers.createQueueHandler('__wkf_step_', execute),
};

const server = createServer(async (req, res) => {
  const url = new URL(req.url, `http://${req.headers.host}`);
  const handler = routes[url.pathname];
  if (!handler || req.method !== 'POST') {
    res.writeHead(url.search === '?__health' ? 200 : 404).end();
    return;
  }
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const response = await handler(
    new Request(url, { method: 'POST', headers: req.headers, body: Buffer.concat(chunks) }),
  );
  res.writeHead(response.status, Object.fromEntries(response.headers)).end(await response.text());
});
await new Promise((resolve) => server.listen(Number(process.env.PORT), '127.0.0.1', resolve));

await world.start();
out('started', { pid: process.pid });
