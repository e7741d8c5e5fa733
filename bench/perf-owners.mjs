// Sums a recovery benchmark's system profiles (-Dbench.perf=DIR) by owner: whose CPU each sample
// was, with every PostgreSQL backend counted for the process it serves.
//
//   node bench/perf-owners.mjs DIR [scenario-substring]
//
// For each DIR/<nn>-<scenario>.data (perf record -a), the snapshot beside it names the owners:
// <...>.ps lists every thread (thread id, process id, command line) and <...>.ss every TCP
// connection with its process. A backend's command line ends in its client's address and port
// ("postgres: user db 127.0.0.1(51234) idle"), and the connection from that port names the client
// process: the service (a JVM started with -Dquarkus.http.port), a replica process
// (bench/replica.mjs), or another. A PostgreSQL process that is not in the snapshot started during
// the window: a connection opened then (the replicas' session locks), or an autovacuum worker. Seconds are samples ÷ the recording's
// frequency; each CPU is sampled whether busy or not, and idle samples are left out.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const [dir, only] = process.argv.slice(2);
if (!dir) {
  console.error('usage: node bench/perf-owners.mjs DIR [scenario-substring]');
  process.exit(2);
}

const perf = (args) => execFileSync('perf', args, { encoding: 'utf8', maxBuffer: 1 << 28, stdio: ['ignore', 'pipe', 'ignore'] });

// Thread id → { pid, args }, from `ps -eLo lwp,pid,args`.
function threads(file) {
  const byTid = new Map();
  for (const line of readFileSync(file, 'utf8').split('\n').slice(1)) {
    const m = /^\s*(\d+)\s+(\d+)\s+(.*)$/.exec(line);
    if (m) byTid.set(Number(m[1]), { pid: Number(m[2]), args: m[3] });
  }
  return byTid;
}

// A client's local port → the process holding it, from `ss -tnp` (connections to any PostgreSQL
// port: the peer side of every backend in the snapshot).
function clients(file) {
  const byPort = new Map();
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const f = line.trim().split(/\s+/);
    const owner = /\(\("([^"]+)",pid=(\d+)/.exec(line);
    if (f[0] !== 'ESTAB' || !owner) continue;
    const port = f[3].slice(f[3].lastIndexOf(':') + 1);
    byPort.set(port, { comm: owner[1], pid: Number(owner[2]) });
  }
  return byPort;
}

const isService = (args) => /java\b.*-Dquarkus\.http\.port=/.test(args);
const isReplica = (args) => /replica\.mjs/.test(args);

function summarise(base) {
  const header = perf(['report', '--header-only', '-i', `${base}.data`]);
  const frequency = Number(/sample_freq \} = (\d+)/.exec(header)?.[1] ?? /freq = (\d+)/.exec(header)?.[1] ?? 499);
  const byTid = threads(`${base}.ps`);
  const byPort = clients(`${base}.ss`);
  const argsOf = (pid) => [...byTid.values()].find((t) => t.pid === pid)?.args ?? '';
  const owners = new Map();
  const replicas = new Map(); // replica process id → its own samples
  const add = (owner, n) => owners.set(owner, (owners.get(owner) ?? 0) + n);
  const rows = perf(['report', '-i', `${base}.data`, '--no-children', '--sort', 'pid', '-g', 'none', '-q', '-F', 'sample,pid']);
  for (const line of rows.split('\n')) {
    const m = /^\s*(\d+)\s+(-?\d+):(.*)$/.exec(line);
    if (!m) continue;
    const n = Number(m[1]);
    const tid = Number(m[2]);
    const comm = m[3].trim();
    if (tid === 0) continue; // idle
    const thread = byTid.get(tid);
    if (comm === 'postgres' || thread?.args.startsWith('postgres:')) {
      if (!thread) {
        add('PostgreSQL: processes started during the window (connections, autovacuum workers)', n);
        continue;
      }
      const port = /\((\d+)\)/.exec(thread.args)?.[1];
      const client = port ? byPort.get(port) : undefined;
      if (!port) add('PostgreSQL: its own processes (writers, autovacuum, …)', n);
      else if (!client) add('PostgreSQL: backends of unknown clients', n);
      else if (isService(argsOf(client.pid))) add('PostgreSQL: backends of the service', n);
      else if (isReplica(argsOf(client.pid))) add('PostgreSQL: backends of replica processes', n);
      else add(`PostgreSQL: backends of ${client.comm} (the benchmark's own)`, n);
      continue;
    }
    if (thread && isService(thread.args)) {
      add(/^C[12] CompilerThre/.test(comm) ? 'service: JIT compilers' : 'service: other threads', n);
      continue;
    }
    if (thread && isReplica(thread.args)) {
      add('replica processes', n);
      replicas.set(thread.pid, (replicas.get(thread.pid) ?? 0) + n);
      continue;
    }
    if (!thread && comm === 'node') {
      add('replica processes: threads started during the window', n);
      continue;
    }
    add(`other: ${comm}`, n);
  }
  const s = (n) => (n / frequency).toFixed(2);
  const busy = [...owners.values()].reduce((a, b) => a + b, 0);
  console.log(`\n${base.slice(base.lastIndexOf('/') + 1)}: ${s(busy)} s of CPU sampled at ${frequency} Hz`);
  console.log('| owner | CPU |');
  console.log('|---|---|');
  const sorted = [...owners.entries()].sort((a, b) => b[1] - a[1]);
  const shown = sorted.filter(([, n]) => n / frequency >= 0.02);
  for (const [owner, n] of shown) console.log(`| ${owner} | ${s(n)} s |`);
  const rest = sorted.slice(shown.length).reduce((a, [, n]) => a + n, 0);
  if (rest > 0) console.log(`| ${sorted.length - shown.length} others, under 0.02 s each | ${s(rest)} s |`);
  if (replicas.size > 0) {
    const each = [...replicas.values()].sort((a, b) => b - a);
    const others = each.slice(2);
    const median = others.length ? others[Math.floor(others.length / 2)] : 0;
    console.log(
      `replica processes: ${replicas.size}; the two busiest ${each.slice(0, 2).map(s).join(' and ')} s;` +
        (others.length ? ` the other ${others.length} ${s(others.reduce((a, b) => a + b, 0))} s in all, median ${(1000 * median / frequency).toFixed(0)} ms each` : ''),
    );
  }
}

const recordings = readdirSync(dir)
  .filter((f) => f.endsWith('.data') && (!only || f.includes(only)))
  .sort();
if (recordings.length === 0) {
  console.error(`no recordings in ${dir}${only ? ` matching ${only}` : ''}`);
  process.exit(1);
}
for (const f of recordings) summarise(join(dir, f.slice(0, -'.data'.length)));
