// Sums the CPU profiles bench/cpu-profile.cjs wrote: node bench/cpu-profile-summary.mjs DIR
// [count: the newest N profiles, default all] [lastSeconds: only each process's last S seconds].
// Prints busy time, the functions with the most self time and the most inclusive time.
import fs from 'node:fs';
import path from 'node:path';

const [dir, count, lastSeconds] = process.argv.slice(2);
let files = fs.readdirSync(dir).filter((f) => f.endsWith('.cpuprofile')).sort();
if (count) files = files.slice(-Number(count));
const self = new Map();
const inclusive = new Map();
let busy = 0;
const add = (m, k, v) => m.set(k, (m.get(k) ?? 0) + v);
const name = (f) => {
  const url = f.url.includes('node_modules/') ? f.url.split('node_modules/').pop() : path.basename(f.url);
  return `${f.functionName || '(anonymous)'} ${url}`;
};
for (const file of files) {
  const p = JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8'));
  const nodes = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const from = lastSeconds ? p.endTime - Number(lastSeconds) * 1e6 : -Infinity;
  let t = p.startTime;
  p.samples.forEach((id, i) => {
    const dt = p.timeDeltas[i];
    t += dt;
    const frame = nodes.get(id).callFrame;
    if (t < from || frame.functionName === '(idle)') return;
    busy += dt;
    add(self, `${name(frame)}:${frame.lineNumber}`, dt);
    const seen = new Set();
    for (let x = id; x !== undefined; x = parent.get(x)) {
      const k = name(nodes.get(x).callFrame);
      if (!seen.has(k)) add(inclusive, k, dt), seen.add(k);
    }
  });
}
const top = (m, n) => [...m].sort((a, b) => b[1] - a[1]).slice(0, n).map(([k, v]) => `${(v / 1000).toFixed(0).padStart(8)} ms  ${k}`);
console.log(`${files.length} profiles, ${(busy / 1000).toFixed(0)} ms busy`);
console.log('self time:\n' + top(self, 20).join('\n'));
console.log('inclusive time:\n' + top(inclusive, 40).join('\n'));
