// CPU a fresh Node.js process spends on the client's calls to the service, over the built-in
// node:http transport and over the global fetch: `node bench/transport-cpu.mjs [calls] [rounds]`.
// A child process plays the service and answers every claim with a batch of 500 runs; each round
// starts one new client process per transport, which makes `calls` claims (30 by default: about
// what a replica makes in a deploy's pass) and reports its own CPU (process.cpuUsage) for the first
// call and for all of them.
import { spawn, execFileSync } from 'node:child_process';
import http from 'node:http';
import { fileURLToPath } from 'node:url';

const self = fileURLToPath(import.meta.url);
const [role, ...args] = process.argv.slice(2);

if (role === 'serve') {
  const runs = Array.from({ length: 500 }, (_, i) => ({
    runId: `wrun_${String(i).padStart(26, '0')}`,
    workflowName: 'checkout',
    queueName: '__wkf_workflow_checkout',
    reason: 'pending',
  }));
  const answer = JSON.stringify({ status: 'batch', batch: { id: 1, epochId: 1, epochKind: 'boot', fence: 1, runs } });
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end(answer));
  });
  server.listen(0, '127.0.0.1', () => console.log(server.address().port));
} else if (role === 'client') {
  const [mode, url, calls] = args;
  const { RollcallApi } = await import('../clients/node/src/index.js');
  const api = new RollcallApi(mode === 'fetch' ? { url, fetch: globalThis.fetch } : { url });
  const start = process.cpuUsage();
  await api.claim('rci_bench', 500);
  const first = process.cpuUsage(start);
  for (let i = 1; i < Number(calls); i++) await api.claim('rci_bench', 500);
  const all = process.cpuUsage(start);
  const ms = (u) => ((u.user + u.system) / 1000).toFixed(1);
  console.log(JSON.stringify({ mode, first: ms(first), all: ms(all) }));
  process.exit(0);
} else {
  const calls = Number(role ?? 30);
  const rounds = Number(args[0] ?? 3);
  const server = spawn(process.execPath, [self, 'serve'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise((resolve) => server.stdout.once('data', (d) => resolve(String(d).trim())));
  const url = `http://127.0.0.1:${port}`;
  try {
    console.log(`${calls} claims answered with 500 runs each, a fresh process per line (CPU ms)`);
    for (let round = 1; round <= rounds; round++) {
      for (const mode of ['fetch', 'node:http']) {
        const r = JSON.parse(execFileSync(process.execPath, [self, 'client', mode, url, String(calls)]).toString());
        console.log(`  round ${round}  ${mode.padEnd(9)}  first call ${r.first.padStart(6)}  all ${r.all.padStart(6)}`);
      }
    }
  } finally {
    server.kill();
  }
}
