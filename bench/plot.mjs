#!/usr/bin/env node
// Draws BENCHMARKS.md's plots, and the cost curves of bench/curve, from bench/results/*.csv as SVG
// into bench/results/, with nothing but Node.js: `node bench/plot.mjs`. Lines starting with '#' in
// a CSV say where its figures come from; the first other line names the columns. A plot whose CSV
// is not there is skipped.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const RESULTS = join(dirname(fileURLToPath(import.meta.url)), 'results');
const W = 640;
const H = 360;
const M = { top: 40, right: 20, bottom: 60, left: 70 };
const COLOURS = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd'];

export function readCsv(name) {
  return parseCsv(readFileSync(join(RESULTS, name), 'utf8'));
}

/** A CSV's rows as objects by column, numbers as numbers; '#' lines and blank lines skipped. */
export function parseCsv(text) {
  const lines = text.split('\n').filter((l) => l.trim() !== '' && !l.startsWith('#'));
  if (lines.length === 0) return [];
  const [head, ...rows] = lines.map((l) => l.split(','));
  return rows.map((r) => Object.fromEntries(head.map((h, i) => [h, isNaN(Number(r[i])) ? r[i] : Number(r[i])])));
}

const esc = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;');

/** A frame with a title, axis labels, y ticks from 0 to yMax and x labels at given positions. */
function frame({ title, xLabel, yLabel, yMax, yTicks = 5, xTicks }) {
  const y = (v) => M.top + (H - M.top - M.bottom) * (1 - v / yMax);
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="22" text-anchor="middle" font-size="14">${esc(title)}</text>`,
    `<text x="${W / 2}" y="${H - 12}" text-anchor="middle">${esc(xLabel)}</text>`,
    `<text transform="translate(16 ${(H - M.bottom + M.top) / 2}) rotate(-90)" text-anchor="middle">${esc(yLabel)}</text>`,
  ];
  for (let i = 0; i <= yTicks; i++) {
    const v = (yMax * i) / yTicks;
    parts.push(
      `<line x1="${M.left}" x2="${W - M.right}" y1="${y(v)}" y2="${y(v)}" stroke="#ddd"/>`,
      `<text x="${M.left - 6}" y="${y(v) + 4}" text-anchor="end">${+v.toFixed(2)}</text>`,
    );
  }
  for (const [x, label] of xTicks) {
    parts.push(`<text x="${x}" y="${H - M.bottom + 18}" text-anchor="middle">${esc(label)}</text>`);
  }
  parts.push(`<line x1="${M.left}" x2="${M.left}" y1="${M.top}" y2="${H - M.bottom}" stroke="#333"/>`);
  parts.push(`<line x1="${M.left}" x2="${W - M.right}" y1="${H - M.bottom}" y2="${H - M.bottom}" stroke="#333"/>`);
  return { parts, y };
}

function legend(parts, entries, step = 170) {
  entries.forEach(([label, colour], i) => {
    const x = M.left + 10 + i * step;
    parts.push(`<rect x="${x}" y="${M.top - 8}" width="10" height="10" fill="${colour}"/>`);
    parts.push(`<text x="${x + 14}" y="${M.top + 1}">${esc(label)}</text>`);
  });
}

const finish = (name, parts) => {
  writeFileSync(join(RESULTS, name), [...parts, '</svg>', ''].join('\n'));
  return name;
};

/** Each scenario's repetitions as dots, one column per scenario, one colour per service replicas. */
function recovery() {
  const rows = readCsv('recovery-100k.csv');
  const groups = [...new Set(rows.map((r) => `N = ${r.replicas}, ${r.kind}`))];
  const step = (W - M.left - M.right) / groups.length;
  const xOf = (g) => M.left + step * (groups.indexOf(g) + 0.5);
  const { parts, y } = frame({
    title: 'A deploy of 100 000 active runs: wall time by scenario',
    xLabel: 'replica processes, and whether each runs the engine\'s world',
    yLabel: 'wall time (s)',
    yMax: 6,
    yTicks: 6,
    xTicks: groups.map((g) => [xOf(g), g]),
  });
  for (const r of rows) {
    const g = `N = ${r.replicas}, ${r.kind}`;
    const dx = (r.service_replicas === 1 ? -1 : 1) * 12 + (r.repetition - 2.5) * 3;
    parts.push(`<circle cx="${xOf(g) + dx}" cy="${y(r.wall_s)}" r="4" fill="${COLOURS[r.service_replicas - 1]}" fill-opacity="0.8"/>`);
  }
  legend(parts, [['one service replica', COLOURS[0]], ['two service replicas', COLOURS[1]]]);
  return finish('recovery-100k.svg', parts);
}

/** p50 and p99 heartbeat latency against the fleet's heartbeat rate, with the 250 ms target. */
function heartbeats() {
  const rows = readCsv('heartbeats.csv');
  const xMax = 5500;
  const xOf = (v) => M.left + ((W - M.left - M.right) * v) / xMax;
  const { parts, y } = frame({
    title: 'Heartbeat latency against the fleet\'s heartbeat rate',
    xLabel: 'heartbeats per second (one service replica, 2 cores)',
    yLabel: 'latency (ms)',
    yMax: 300,
    yTicks: 6,
    xTicks: [0, 1000, 2000, 3000, 4000, 5000].map((v) => [xOf(v), v]),
  });
  parts.push(`<line x1="${M.left}" x2="${W - M.right}" y1="${y(250)}" y2="${y(250)}" stroke="#999" stroke-dasharray="6 4"/>`);
  parts.push(`<text x="${W - M.right - 4}" y="${y(250) - 6}" text-anchor="end" fill="#666">target: p99 ≤ 250 ms at 5 000/s</text>`);
  [['p50_ms', COLOURS[0]], ['p99_ms', COLOURS[1]]].forEach(([col, colour]) => {
    const pts = rows.map((r) => `${xOf(r.beats_per_second)},${y(r[col])}`).join(' ');
    parts.push(`<polyline points="${pts}" fill="none" stroke="${colour}" stroke-width="2"/>`);
    for (const r of rows) parts.push(`<circle cx="${xOf(r.beats_per_second)}" cy="${y(r[col])}" r="4" fill="${colour}"/>`);
  });
  legend(parts, [['p50', COLOURS[0]], ['p99', COLOURS[1]]]);
  return finish('heartbeats.svg', parts);
}

/** From a kill to the work moving on, by how the death is found: p50 and p99 bars. */
function detection() {
  const rows = readCsv('detection.csv');
  const step = (W - M.left - M.right) / rows.length;
  const { parts, y } = frame({
    title: 'kill -9 of a process → its work moves on',
    xLabel: '',
    yLabel: 'seconds after the kill',
    yMax: 12,
    yTicks: 6,
    xTicks: rows.map((r, i) => [M.left + step * (i + 0.5), r.path]),
  });
  rows.forEach((r, i) => {
    const x = M.left + step * (i + 0.5);
    [['p50_s', -22, COLOURS[0]], ['p99_s', 2, COLOURS[1]]].forEach(([col, dx, colour]) => {
      parts.push(`<rect x="${x + dx}" y="${y(r[col])}" width="20" height="${y(0) - y(r[col])}" fill="${colour}"/>`);
      parts.push(`<text x="${x + dx + 10}" y="${y(r[col]) - 4}" text-anchor="middle">${r[col]}</text>`);
    });
  });
  legend(parts, [['p50', COLOURS[0]], ['p99', COLOURS[1]]]);
  return finish('detection.svg', parts);
}

/** The soak's weeks: sweep pass time (p50, max) stays flat while history accumulates. */
function soak() {
  const rows = readCsv('soak.csv');
  const step = (W - M.left - M.right) / rows.length;
  const xOf = (w) => M.left + step * (w - 0.5);
  const { parts, y } = frame({
    title: 'Four simulated weeks: sweep pass time stays flat',
    xLabel: 'simulated week',
    yLabel: 'sweep pass (ms)',
    yMax: 1200,
    yTicks: 6,
    xTicks: rows.map((r) => [xOf(r.week), `week ${r.week} (ledger ${r.ledger_rows.toLocaleString('en')})`]),
  });
  [['sweep_p50_ms', COLOURS[0]], ['sweep_max_ms', COLOURS[1]]].forEach(([col, colour]) => {
    parts.push(`<polyline points="${rows.map((r) => `${xOf(r.week)},${y(r[col])}`).join(' ')}" fill="none" stroke="${colour}" stroke-width="2"/>`);
    for (const r of rows) parts.push(`<circle cx="${xOf(r.week)}" cy="${y(r[col])}" r="4" fill="${colour}"/>`);
  });
  legend(parts, [['p50', COLOURS[0]], ['max', COLOURS[1]]]);
  return finish('soak.svg', parts);
}

/** A round number at least `v`: 1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a power of ten. */
export function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  return [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10].find((m) => m * p >= v - 1e-9 * p) * p;
}

/** A frame's y axis up to a figure: a round top (niceMax) and as many ticks as make round steps. */
function yAxis(v) {
  const yMax = niceMax(v);
  const m = +(yMax / 10 ** Math.floor(Math.log10(yMax))).toFixed(3);
  return { yMax, yTicks: { 1: 5, 1.2: 6, 1.5: 5, 2: 4, 2.5: 5, 3: 6, 4: 4, 5: 5, 6: 6, 8: 4, 10: 5 }[m] ?? 5 };
}

/** Several frames' parts, one under the other, as one SVG. */
function stacked(name, panels) {
  const height = H * panels.length;
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${height}" viewBox="0 0 ${W} ${height}" font-family="sans-serif" font-size="12">`,
  ];
  panels.forEach((p, i) => parts.push(`<g transform="translate(0 ${i * H})">`, ...p.slice(1), '</g>'));
  return finish(name, parts);
}

/** A line with its points, through (x, y) pairs; dashed if asked. */
function line(parts, points, colour, dashed = false) {
  parts.push(
    `<polyline points="${points.map(([x, y]) => `${x},${y}`).join(' ')}" fill="none" stroke="${colour}" stroke-width="2"${dashed ? ' stroke-dasharray="6 4"' : ''}/>`,
  );
  for (const [x, y] of points) parts.push(`<circle cx="${x}" cy="${y}" r="4" fill="${colour}"/>`);
}

/** The instances curve (bench/curve instances): latencies, then CPU per 1 000 beats/s, by fleet size. */
function instances() {
  const rows = readCsv('instances.csv');
  const xMax = niceMax(Math.max(...rows.map((r) => r.instances)) * 1.05);
  const xOf = (v) => M.left + ((W - M.left - M.right) * v) / xMax;
  const xTicks = rows.map((r) => [xOf(r.instances), r.instances.toLocaleString('en')]);
  // −1: no sample (no claimers, say): not drawn.
  const drawn = (col) => rows.filter((r) => r[col] >= 0);
  const latencies = [
    ['heartbeat p50', 'heartbeat_p50_ms', COLOURS[0], false],
    ['heartbeat p99', 'heartbeat_p99_ms', COLOURS[1], false],
    ['claim p50', 'claim_p50_ms', COLOURS[2], true],
    ['claim p99', 'claim_p99_ms', COLOURS[3], true],
  ];
  const top = frame({
    title: `Latency against the fleet's size (a heartbeat every ${rows[0].heartbeat_ms / 1000} s, ${rows[0].claimers} claimers)`,
    xLabel: 'instances (median of each size\'s runs)',
    yLabel: 'latency (ms)',
    ...yAxis(Math.max(...rows.flatMap((r) => latencies.map(([, col]) => r[col]))) * 1.1),
    xTicks,
  });
  for (const [, col, colour, dashed] of latencies) {
    line(top.parts, drawn(col).map((r) => [xOf(r.instances), top.y(r[col])]), colour, dashed);
  }
  legend(top.parts, latencies.map(([label, , colour]) => [label, colour]), 135);
  const cpu = [
    ['service', 'service_cpu_per_1000_beats', COLOURS[0]],
    ['PostgreSQL', 'postgres_cpu_per_1000_beats', COLOURS[1]],
  ];
  const bottom = frame({
    title: 'CPU per 1 000 heartbeats a second (the claimers\' work included)',
    xLabel: 'instances (median of each size\'s runs)',
    yLabel: 'cores per 1 000 beats/s',
    ...yAxis(Math.max(...rows.flatMap((r) => cpu.map(([, col]) => r[col]))) * 1.1),
    xTicks,
  });
  for (const [, col, colour] of cpu) line(bottom.parts, drawn(col).map((r) => [xOf(r.instances), bottom.y(r[col])]), colour);
  legend(bottom.parts, cpu.map(([label, , colour]) => [label, colour]));
  return stacked('instances.svg', [top.parts, bottom.parts]);
}

/** The runs curve (bench/curve runs): time per 100 000 active runs, and the floor's, on a log x axis. */
function runs() {
  const rows = readCsv('runs.csv');
  const sizes = [...new Set(rows.map((r) => r.runs))].sort((a, b) => a - b);
  const lo = 10 ** Math.floor(Math.log10(sizes[0]));
  const hi = 10 ** Math.max(Math.ceil(Math.log10(sizes[sizes.length - 1])), Math.log10(lo) + 1);
  const pad = 30;
  const xOf = (v) => M.left + pad + ((W - M.left - M.right - 2 * pad) * Math.log10(v / lo)) / Math.log10(hi / lo);
  const decades = [];
  for (let d = lo; d <= hi; d *= 10) if (!sizes.includes(d)) decades.push([xOf(d), d.toLocaleString('en')]);
  for (const n of sizes) decades.push([xOf(n), n.toLocaleString('en')]);
  const groups = [...new Set(rows.map((r) => `${r.kind}|${r.replicas}|${r.service_replicas}`))];
  const many = new Set(rows.map((r) => `${r.kind}|${r.replicas}`)).size > 1;
  const floor = sizes.map((n) => {
    const f = rows.filter((r) => r.runs === n).map((r) => r.floor_per_100k_s).sort((a, b) => a - b);
    return [n, f[Math.floor((f.length - 1) / 2)]];
  });
  const { parts, y } = frame({
    title: `A deploy's recovery: time per 100 000 active runs${many ? '' : `, N = ${rows[0].replicas} replica processes`}`,
    xLabel: 'active runs (log scale)',
    yLabel: 's per 100 000 runs',
    ...yAxis(Math.max(...rows.map((r) => r.wall_per_100k_s), ...floor.map(([, f]) => f)) * 1.1),
    xTicks: decades,
  });
  const entries = [];
  groups.forEach((g, i) => {
    const [kind, replicas, services] = g.split('|');
    const colour = COLOURS[i % COLOURS.length];
    const pts = rows.filter((r) => `${r.kind}|${r.replicas}|${r.service_replicas}` === g).sort((a, b) => a.runs - b.runs);
    line(parts, pts.map((r) => [xOf(r.runs), y(r.wall_per_100k_s)]), colour);
    const who = { 1: 'one service replica', 2: 'two service replicas' }[services] ?? `${services} service replicas`;
    entries.push([many ? `${kind} N=${replicas}, ${who}` : who, colour]);
  });
  line(parts, floor.map(([n, f]) => [xOf(n), y(f)]), '#555', true);
  entries.push(['the floor', '#555']);
  legend(parts, entries);
  return finish('runs.svg', parts);
}

/** Each plot and the CSV it is drawn from. */
const PLOTS = [
  [recovery, 'recovery-100k.csv'],
  [heartbeats, 'heartbeats.csv'],
  [detection, 'detection.csv'],
  [soak, 'soak.csv'],
  [instances, 'instances.csv'],
  [runs, 'runs.csv'],
];

/** Draws every plot whose CSV is there; says which were skipped. */
export function drawAll() {
  for (const [plot, csv] of PLOTS) {
    if (!existsSync(join(RESULTS, csv))) {
      console.log(`skipped: bench/results/${csv} is not there`);
    } else if (readCsv(csv).length === 0) {
      console.log(`skipped: bench/results/${csv} has no rows`);
    } else {
      console.log(`bench/results/${plot()}`);
    }
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  drawAll();
}
