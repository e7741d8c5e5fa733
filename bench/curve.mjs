// Draws one cost curve: runs a benchmark at each size of the curve, R times, with its figures
// appended to bench/results/<curve>-runs.csv (one row a run: -Dbench.results), then writes
// bench/results/<curve>.csv, each point the median of its runs, and redraws the plots
// (bench/plot.mjs). Run it as `bench/curve <curve> [-Dproperty=value ...]`; other options go to
// the benchmark (and so to Maven, as with bench/run).
//
//   instances  bench/run load at -Dbench.instances=1000,5000,15000, -Dbench.heartbeat-ms=3000,
//              -Dbench.claimers=64, each size -Dbench.repeat=3 times (every other repetition the
//              sizes in reverse); a run whose driver lagged (driver_lagging: its heartbeats'
//              wait or its claims' lateness p99 over -Dbench.max-driver-lag-ms, 50) is left out of
//              its point, and a size left with no run is no point; both are listed in a # line
//   runs       bench/run recovery -Dbench.runs=10000,100000,1000000 -Dbench.replicas=4
//              -Dbench.scenarios=rollcall -Dbench.repeat=3 (its own repetitions); a point per
//              size and number of service replicas: median wall, the median of the floors timed
//              for its scenarios, both per 100 000 runs, rows read, RSS, CPU
//   rest       bench/run rest at -Dbench.rest-points=100:0,1:1000 (namespaces:idle instances),
//              -Dbench.repeat=3 times each
//
// `bench/curve <curve> --no-run` writes <curve>.csv again from the <curve>-runs.csv there is.
// The figures of a curve are the runs file's: `#` lines at the top of both files say what ran,
// on which commit, when and on what machine.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { drawAll, parseCsv } from './plot.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const RESULTS = join(ROOT, 'bench', 'results');

/** The median of numbers; of an even count, the mean of the two middle ones. */
export function median(values) {
  if (values.length === 0) throw new Error('no values');
  const s = [...values].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** A figure as a CSV cell: at most three decimals, no trailing zeros. */
export const cell = (v) => (typeof v === 'number' ? String(+v.toFixed(3)) : String(v));

/** The command line's -D properties (in order, the last of a name wins) and its other options. */
export function splitArgs(args) {
  const props = new Map();
  const other = [];
  for (const a of args) {
    const m = /^-D([^=]+)=(.*)$/.exec(a);
    if (m) {
      props.delete(m[1]);
      props.set(m[1], m[2]);
    } else {
      other.push(a);
    }
  }
  return { props, other };
}

/** A comma-separated list of positive whole numbers. */
export function sizes(text, name) {
  const list = String(text).split(',').map((s) => s.trim());
  if (list.some((s) => !/^[1-9][0-9]*$/.test(s))) throw new Error(`-D${name}: whole numbers, comma-separated: ${text}`);
  return list.map(Number);
}

/** Repetition k's order (0-based): as given, every other one reversed, as the recovery benchmark does. */
export const inTurn = (list, k) => (k % 2 === 0 ? [...list] : [...list].reverse());

/** Rows grouped by the values of `keys`, groups in the order first met. */
function groupBy(rows, keys) {
  const groups = new Map();
  for (const r of rows) {
    const id = keys.map((k) => r[k]).join('|');
    if (!groups.has(id)) groups.set(id, []);
    groups.get(id).push(r);
  }
  return [...groups.values()];
}

const lagged = (r) => r.driver_lagging === true || r.driver_lagging === 'true';

/** The median over runs of their cores per 1 000 heartbeats a second; −1 if none beat. */
function perThousandBeats(runs, column) {
  const beating = runs.filter((r) => r.beats_per_s > 0);
  return beating.length === 0 ? -1 : median(beating.map((r) => (1000 * r[column]) / r.beats_per_s));
}

/**
 * The instances curve from the load runs: per size, the median of each figure over the runs whose
 * driver kept up; `dropped` says which runs were left out and which sizes kept none.
 */
export function summarizeInstances(rows) {
  const points = [];
  const dropped = [];
  for (const runs of groupBy(rows, ['instances'])) {
    const n = runs[0].instances;
    const out = runs.filter(lagged);
    const kept = runs.filter((r) => !lagged(r));
    if (out.length > 0) {
      dropped.push(
        `${n} instances: ${out.length} of ${runs.length} runs` +
          ` (heartbeat wait p99 ${out.map((r) => r.heartbeat_wait_p99_ms).join(', ')} ms,` +
          ` claims late p99 ${out.map((r) => r.claim_late_p99_ms).join(', ')} ms;` +
          ` threshold ${out[0].max_driver_lag_ms} ms)` +
          (kept.length === 0 ? ': no point' : ''),
      );
    }
    if (kept.length === 0) continue;
    const med = (f) => median(kept.map(f));
    points.push({
      instances: n,
      heartbeat_ms: med((r) => r.heartbeat_ms),
      claimers: med((r) => r.claimers),
      runs: kept.length,
      beats_per_s: med((r) => r.beats_per_s),
      heartbeat_p50_ms: med((r) => r.heartbeat_p50_ms),
      heartbeat_p99_ms: med((r) => r.heartbeat_p99_ms),
      claim_p50_ms: med((r) => r.claim_p50_ms),
      claim_p99_ms: med((r) => r.claim_p99_ms),
      beats_per_transaction: med((r) => r.beats_per_transaction),
      service_cpu_cores: med((r) => r.service_cpu_cores),
      postgres_cpu_cores: med((r) => r.postgres_cpu_cores),
      driver_cpu_cores: med((r) => r.driver_cpu_cores),
      service_cpu_per_1000_beats: perThousandBeats(kept, 'service_cpu_cores'),
      postgres_cpu_per_1000_beats: perThousandBeats(kept, 'postgres_cpu_cores'),
      errors: med((r) => r.errors),
      leases_lost: med((r) => r.leases_lost),
      service_rss_mib: med((r) => r.service_rss_mib),
    });
  }
  points.sort((a, b) => a.instances - b.instances);
  return { points, dropped };
}

/**
 * The runs curve from the recovery benchmark's rows: per Rollcall kind, N, service replicas and
 * size, the median of each figure over its repetitions (floor rows are in the Rollcall rows'
 * floor_s, the floor timed for each).
 */
export function summarizeRuns(rows) {
  const scenarios = rows.filter((r) => !String(r.kind).startsWith('floor'));
  const points = groupBy(scenarios, ['kind', 'replicas', 'service_replicas', 'runs']).map((g) => {
    const med = (f) => median(g.map(f));
    const runs = g[0].runs;
    return {
      runs,
      kind: g[0].kind,
      replicas: g[0].replicas,
      service_replicas: g[0].service_replicas,
      repetitions: g.length,
      capped: g.filter((r) => r.capped === true || r.capped === 'true').length,
      wall_s: med((r) => r.wall_s),
      floor_s: med((r) => r.floor_s),
      wall_per_100k_s: med((r) => (r.wall_s * 100000) / runs),
      floor_per_100k_s: med((r) => (r.floor_s * 100000) / runs),
      done_s: med((r) => r.done_s),
      rows_read_per_run: med((r) => r.rows_read_per_run),
      coordinator_cpu_s: med((r) => r.coordinator_cpu_s),
      coordinator_rss_mib: med((r) => r.coordinator_rss_mib),
      postgres_cpu_s: med((r) => r.postgres_cpu_s),
    };
  });
  points.sort((a, b) => String(a.kind).localeCompare(b.kind) || a.replicas - b.replicas
    || a.service_replicas - b.service_replicas || a.runs - b.runs);
  return { points, dropped: [] };
}

/** The rest points: per number of namespaces and idle instances, the median of each figure. */
export function summarizeRest(rows) {
  const points = groupBy(rows, ['namespaces', 'idle_instances']).map((g) => {
    const med = (f) => median(g.map(f));
    return {
      namespaces: g[0].namespaces,
      idle_instances: g[0].idle_instances,
      runs: g.length,
      seconds: med((r) => r.seconds),
      service_cpu_pct: med((r) => r.service_cpu_pct),
      transactions_per_s: med((r) => r.transactions_per_s),
      transactions_per_s_per_namespace: med((r) => r.transactions_per_s_per_namespace),
      service_rss_mib: med((r) => r.service_rss_mib),
      idle_heartbeats_per_s: med((r) => r.idle_heartbeats_per_s),
      idle_heartbeat_errors: med((r) => r.idle_heartbeat_errors),
    };
  });
  return { points, dropped: [] };
}

/** A CSV: `#` lines, the columns of the first point, a line per point. */
export function csv(comments, points) {
  const lines = comments.map((c) => `# ${c}`);
  if (points.length > 0) {
    const columns = Object.keys(points[0]);
    lines.push(columns.join(','), ...points.map((p) => columns.map((c) => cell(p[c])).join(',')));
  }
  return `${lines.join('\n')}\n`;
}

/** Each curve: the benchmark, what it sets unless told otherwise, and how its runs go. */
const CURVES = {
  instances: {
    bench: 'load',
    defaults: { 'bench.instances': '1000,5000,15000', 'bench.heartbeat-ms': '3000', 'bench.claimers': '64', 'bench.repeat': '3' },
    // One run a size and repetition: the load benchmark has no repetitions of its own.
    runs(props) {
      const list = sizes(props.get('bench.instances'), 'bench.instances');
      const times = sizes(props.get('bench.repeat'), 'bench.repeat')[0];
      const runs = [];
      for (let k = 0; k < times; k++) for (const n of inTurn(list, k)) runs.push({ 'bench.instances': String(n) });
      return { runs, own: ['bench.instances', 'bench.repeat'] };
    },
    summarize: summarizeInstances,
    explain: (rows) => [
      "each point: the median over its size's runs (runs: how many) whose driver kept up: heartbeat wait p99" +
        ` and claims late p99 at most ${[...new Set(rows.map((r) => r.max_driver_lag_ms))].join(' or ')} ms` +
        " (-Dbench.max-driver-lag-ms); CPU in cores over the window, the claimers' work included;" +
        " *_per_1000_beats: cores per 1 000 heartbeats a second, each run's, then the median",
    ],
  },
  runs: {
    bench: 'recovery',
    defaults: {
      'bench.runs': '10000,100000,1000000',
      'bench.replicas': '4',
      'bench.scenarios': 'rollcall',
      'bench.repeat': '3',
    },
    // One run: the recovery benchmark repeats its scenarios itself.
    runs: () => ({ runs: [{}], own: [] }),
    summarize: summarizeRuns,
    explain: () => [
      'each point: the median over the repetitions (repetitions: how many) of one kind, N (replicas) and number' +
        ' of service replicas; floor_s: the median of the floors timed just before each; wall from "go" until' +
        ' every replica process has exited; *_per_100k_s: seconds per 100 000 active runs',
    ],
  },
  rest: {
    bench: 'rest',
    defaults: { 'bench.rest-points': '100:0,1:1000', 'bench.repeat': '3' },
    runs(props) {
      const points = String(props.get('bench.rest-points')).split(',').map((p) => {
        const m = /^\s*([0-9]+):([0-9]+)\s*$/.exec(p);
        if (!m) throw new Error(`-Dbench.rest-points: namespaces:idle instances, comma-separated: ${p}`);
        return { 'bench.namespaces': m[1], 'bench.idle-instances': m[2] };
      });
      const times = sizes(props.get('bench.repeat'), 'bench.repeat')[0];
      const runs = [];
      for (let k = 0; k < times; k++) runs.push(...inTurn(points, k));
      return { runs, own: ['bench.rest-points', 'bench.repeat', 'bench.namespaces', 'bench.idle-instances'] };
    },
    summarize: summarizeRest,
    explain: () => [
      'each point: the median over the runs (runs: how many) of one number of namespaces and idle instances;' +
        " service CPU in % of one core; transactions: the whole database's",
    ],
  },
};

function sh(cmd, args) {
  try {
    return execFileSync(cmd, args, { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return '';
  }
}

/** Where the figures come from: commit (and whether the tree differed from it), date, machine. */
function provenance() {
  const commit = sh('git', ['rev-parse', '--short', 'HEAD']) || 'unknown commit';
  const changed = sh('git', ['status', '--porcelain', '--', '.', ':!bench/results']) !== '';
  const cores = sh('nproc', []) || String(os.availableParallelism?.() ?? os.cpus().length);
  const model = os.cpus()[0]?.model?.trim() ?? 'unknown CPU';
  const memory = (os.totalmem() / 2 ** 30).toFixed(1);
  const postgres = process.env.ROLLCALL_TEST_JDBC_URL ? 'PostgreSQL at ROLLCALL_TEST_JDBC_URL' : 'embedded PostgreSQL';
  return [
    `measured on ${commit}${changed ? ' with uncommitted changes' : ''} (${new Date().toISOString().slice(0, 10)});` +
      ` ${cores} cores (${model}), ${memory} GiB memory, ${os.platform()}; ${postgres}`,
  ];
}

function main(argv) {
  const [name, ...rest] = argv;
  const curve = CURVES[name];
  if (!curve) {
    const usage = readFileSync(fileURLToPath(import.meta.url), 'utf8').split('\n');
    console.error(usage.slice(0, usage.findIndex((l) => !l.startsWith('//'))).map((l) => l.replace(/^\/\/ ?/, '')).join('\n'));
    return 2;
  }
  const noRun = rest.includes('--no-run');
  const { props: given, other } = splitArgs(rest.filter((a) => a !== '--no-run'));
  if (given.has('bench.results')) {
    console.error('bench/curve names the results file itself: leave out -Dbench.results');
    return 2;
  }
  const props = new Map(Object.entries(curve.defaults));
  for (const [k, v] of given) props.set(k, v);
  const runsFile = join(RESULTS, `${name}-runs.csv`);
  const curveFile = join(RESULTS, `${name}.csv`);
  const command = ['bench/curve', name, ...rest.filter((a) => a !== '--no-run')].join(' ');

  if (!noRun) {
    const { runs, own } = curve.runs(props);
    const passed = [...props].filter(([k]) => !own.includes(k)).map(([k, v]) => `-D${k}=${v}`);
    writeFileSync(
      runsFile,
      csv(
        [
          `${command}: ${runs.length} run${runs.length === 1 ? '' : 's'} of bench/run ${curve.bench} ${passed.join(' ')}`,
          ...provenance(),
          'one row a measured run (-Dbench.results); columns: docs/benchmarks-method.md, "Cost curves"',
        ],
        [],
      ),
    );
    for (const [i, run] of runs.entries()) {
      const args = [
        ...passed,
        ...Object.entries(run).map(([k, v]) => `-D${k}=${v}`),
        `-Dbench.results=${runsFile}`,
        ...other,
      ];
      console.log(`\nbench/curve ${name}: run ${i + 1} of ${runs.length}: bench/run ${curve.bench} ${args.join(' ')}`);
      const done = spawnSync('sh', [join(ROOT, 'bench', 'run'), curve.bench, ...args], { cwd: ROOT, stdio: 'inherit' });
      if (done.status !== 0) {
        console.error(
          `bench/curve ${name}: bench/run ${curve.bench} failed (${done.status ?? done.signal});` +
            ` the runs so far are in bench/results/${name}-runs.csv: bench/curve ${name} --no-run summarizes them`,
        );
        return 1;
      }
    }
  }
  if (!existsSync(runsFile)) {
    console.error(`bench/curve ${name}: no bench/results/${name}-runs.csv: run the curve first`);
    return 1;
  }
  const text = readFileSync(runsFile, 'utf8');
  const header = text.split('\n').filter((l) => l.startsWith('#')).map((l) => l.replace(/^# ?/, ''));
  const rows = parseCsv(text);
  const { points, dropped } = curve.summarize(rows);
  writeFileSync(
    curveFile,
    csv(
      [
        ...header.filter((l) => !l.startsWith('one row a measured run')),
        ...curve.explain(rows),
        ...(dropped.length > 0 ? [`left out, the driver lagging: ${dropped.join('; ')}`] : []),
        `runs: bench/results/${name}-runs.csv`,
      ],
      points,
    ),
  );
  console.log(`\nbench/results/${name}.csv: ${points.length} point${points.length === 1 ? '' : 's'}`);
  dropped.forEach((d) => console.log(`left out, the driver lagging: ${d}`));
  drawAll();
  return 0;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  process.exitCode = main(process.argv.slice(2));
}
