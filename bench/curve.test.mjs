// The pure logic of bench/curve.mjs and bench/plot.mjs: `node --test bench/`.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { csv, inTurn, median, sizes, splitArgs, summarizeInstances, summarizeRest, summarizeRuns } from './curve.mjs';
import { niceMax, parseCsv } from './plot.mjs';

const LOAD_COLUMNS =
  'instances,heartbeat_ms,claimers,seconds,beats_per_s,heartbeat_p50_ms,heartbeat_p99_ms,claim_p50_ms,' +
  'claim_p99_ms,beats_per_transaction,service_cpu_cores,postgres_cpu_cores,driver_cpu_cores,' +
  'heartbeat_wait_p99_ms,claim_late_p99_ms,errors,leases_lost,service_rss_mib,max_driver_lag_ms,driver_lagging';

/** A load run's row: n instances, heartbeat p99, service cores, the two lag figures, lagging. */
const load = (n, p99, cores, wait, late, lagging) =>
  `${n},3000,64,30,${n / 3},3,${p99},4,40,2.5,${cores},0.3,0.6,${wait},${late},0,0,310,50,${lagging}`;

test('the median of an odd count is the middle value, of an even count the mean of the two', () => {
  assert.equal(median([5, 1, 3]), 3);
  assert.equal(median([4, 1, 3, 2]), 2.5);
  assert.equal(median([7]), 7);
  assert.throws(() => median([]));
});

test('-D options are split from the rest, the last of a name winning', () => {
  const { props, other } = splitArgs(['-o', '-Dbench.seconds=5', '-Dbench.seconds=6', '-Da=b=c', '-q']);
  assert.deepEqual([...props], [['bench.seconds', '6'], ['a', 'b=c']]);
  assert.deepEqual(other, ['-o', '-q']);
});

test('sizes are whole numbers, and every other repetition runs them in reverse', () => {
  assert.deepEqual(sizes('1000, 5000,15000', 'bench.instances'), [1000, 5000, 15000]);
  assert.throws(() => sizes('1000,5k', 'bench.instances'), /bench.instances/);
  assert.deepEqual(inTurn([1, 2, 3], 0), [1, 2, 3]);
  assert.deepEqual(inTurn([1, 2, 3], 1), [3, 2, 1]);
});

test('each size is the median of its runs whose driver kept up; lagging runs are listed', () => {
  const rows = parseCsv(
    [
      '# bench/curve instances',
      LOAD_COLUMNS,
      load(1000, 20, 0.4, 2, 1, false),
      load(1000, 30, 0.5, 3, 1, false),
      load(1000, 900, 0.9, 400, 1, true),
      load(5000, 60, 1.5, 10, 5, false),
      load(15000, 3000, 1.9, 800, 90, true),
      '',
    ].join('\n'),
  );
  const { points, dropped } = summarizeInstances(rows);
  assert.deepEqual(points.map((p) => [p.instances, p.runs, p.heartbeat_p99_ms]), [[1000, 2, 25], [5000, 1, 60]]);
  // 0.4 cores at 333.33 beats/s: 1.2 cores per 1 000; 0.5: 1.5; median 1.35.
  assert.ok(Math.abs(points[0].service_cpu_per_1000_beats - 1.35) < 1e-9);
  assert.equal(dropped.length, 2);
  assert.match(dropped[0], /^1000 instances: 1 of 3 runs \(heartbeat wait p99 400 ms, claims late p99 1 ms; threshold 50 ms\)$/);
  assert.match(dropped[1], /^15000 instances: 1 of 1 runs .*: no point$/);
});

test('the runs curve takes Rollcall rows only, by service replicas, and scales to 100 000 runs', () => {
  const rows = parseCsv(
    [
      'runs,kind,replicas,service_replicas,repetition,wall_s,capped,done_s,floor_s,rows_read_per_run,coordinator_cpu_s,coordinator_rss_mib,postgres_cpu_s',
      '10000,floor,,,,0.2,false,0.2,,1.1,,,0.2',
      '10000,floor-before-rollcall,4,,1,0.25,false,0.25,,1.1,,,0.2',
      '10000,rollcall,4,1,1,1.0,false,0.8,0.25,3.2,0.9,300,1.5',
      '10000,rollcall,4,2,1,1.2,false,0.9,0.25,3.4,1.1,600,1.6',
      '10000,floor-before-rollcall,4,,2,0.35,false,0.35,,1.1,,,0.2',
      '10000,rollcall,4,2,2,1.4,false,1.0,0.35,3.6,1.3,610,1.7',
      '10000,rollcall,4,1,2,2.0,false,1.1,0.35,3.0,1.0,310,1.4',
    ].join('\n'),
  );
  const { points } = summarizeRuns(rows);
  assert.deepEqual(
    points.map((p) =>
      [p.service_replicas, p.repetitions, p.wall_s, p.floor_s, p.wall_per_100k_s, p.coordinator_rss_mib].map(
        (v) => +v.toFixed(3),
      ),
    ),
    [
      [1, 2, 1.5, 0.3, 15, 305],
      [2, 2, 1.3, 0.3, 13, 605],
    ],
  );
  assert.equal(+points[0].floor_per_100k_s.toFixed(3), 3);
});

test('rest points are the medians of each number of namespaces and idle instances', () => {
  const rows = parseCsv(
    [
      'namespaces,idle_instances,seconds,warmup_seconds,service_cpu_pct,transactions_per_s,transactions_per_s_per_namespace,service_rss_mib,idle_heartbeats_per_s,idle_heartbeat_errors',
      '100,0,40,20,1.0,10,0.1,200,0,0',
      '1,1000,40,20,9.0,40,40,250,333.3,0',
      '1,1000,40,20,7.0,44,44,260,333.4,0',
      '100,0,40,20,3.0,12,0.12,210,0,0',
    ].join('\n'),
  );
  const { points } = summarizeRest(rows);
  assert.deepEqual(
    points.map((p) => [p.namespaces, p.idle_instances, p.runs, p.service_cpu_pct, p.transactions_per_s]),
    [
      [100, 0, 2, 2, 11],
      [1, 1000, 2, 8, 42],
    ],
  );
});

test('a curve file is its # lines, the columns and a line per point, at most three decimals', () => {
  assert.equal(
    csv(['bench/curve rest', 'measured on abc1234'], [{ a: 1, b: 2 / 3 }, { a: 10, b: 0.5 }]),
    '# bench/curve rest\n# measured on abc1234\na,b\n1,0.667\n10,0.5\n',
  );
  assert.equal(csv(['only comments'], []), '# only comments\n');
  assert.deepEqual(parseCsv('# only comments\n'), []);
});

test('plot axes end at a round number at or above the largest figure', () => {
  assert.equal(niceMax(0), 1);
  assert.equal(niceMax(1), 1);
  assert.equal(niceMax(11), 12);
  assert.equal(niceMax(15750), 20000);
  assert.equal(niceMax(0.033), 0.04);
});
