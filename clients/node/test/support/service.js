// Starts the real Rollcall service (the packaged jar) for tests and the benchmark. With no
// QUARKUS_DATASOURCE_* set it starts its own embedded PostgreSQL and logs its port; the engine's
// and graphile-worker's schemas are then built in that database by the engine's own setup program.
import { spawn, execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const here = dirname(fileURLToPath(import.meta.url));

/** The service jar: ROLLCALL_JAR, else the Maven build output of this repository. */
export const JAR = process.env.ROLLCALL_JAR || resolve(here, '../../../../target/quarkus-app/quarkus-run.jar');

export const NAMESPACE = 'app';
export const SECRET = 'test-registration-secret';

/** A free TCP port on the loopback interface. */
export function freePort() {
  return new Promise((ok, fail) => {
    const server = createServer();
    server.unref();
    server.on('error', fail);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => ok(port));
    });
  });
}

/**
 * Starts the service with an embedded PostgreSQL and namespace `app` over the engine's runs
 * table. Resolves once the HTTP port answers, with {url, dbUrl, stop()}. Short timings by default
 * (lease 2 s, heartbeat 500 ms, batch lease 3 s); `env` overrides them.
 */
export async function startService({ env = {}, startTimeoutMs = 120_000, log = false } = {}) {
  if (!existsSync(JAR)) {
    throw new Error(`no service jar at ${JAR}: build it first with ./mvnw -B package -DskipTests in the repository root`);
  }
  const [httpPort, managementPort] = [await freePort(), await freePort()];
  const childEnv = { ...process.env };
  for (const k of Object.keys(childEnv)) if (k.startsWith('QUARKUS_DATASOURCE_') || k.startsWith('ROLLCALL_')) delete childEnv[k];
  Object.assign(childEnv, {
    QUARKUS_HTTP_HOST: '127.0.0.1',
    QUARKUS_HTTP_PORT: String(httpPort),
    QUARKUS_MANAGEMENT_HOST: '127.0.0.1',
    QUARKUS_MANAGEMENT_PORT: String(managementPort),
    [`ROLLCALL_NAMESPACES__${NAMESPACE.toUpperCase()}__REGISTRATION_SECRET`]: SECRET,
    [`ROLLCALL_NAMESPACES__${NAMESPACE.toUpperCase()}__SOURCE_KIND`]: 'world-postgres',
    ROLLCALL_DEMO: 'true',
    ROLLCALL_LEASE_TTL: '2s',
    ROLLCALL_HEARTBEAT_INTERVAL: '500ms',
    ROLLCALL_BATCH_LEASE: '3s',
    ...env,
  });
  const java = process.env.JAVA_HOME ? resolve(process.env.JAVA_HOME, 'bin/java') : 'java';
  const child = spawn(java, ['-Xmx512m', '-jar', JAR], { env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines = [];
  let dbPort = null;
  let postmasterPid = null;
  let listening = false;
  let waiters = [];
  const onLine = (line) => {
    lines.push(line);
    if (lines.length > 400) lines.shift();
    if (log) process.stderr.write(`[rollcall] ${line}\n`);
    // The demo's banner names the embedded database's port (its start itself is quiet).
    const port =
      /Database\s+embedded PostgreSQL on localhost:(\d+) \(user postgres/.exec(line) ??
      /started an embedded PostgreSQL on port (\d+) \(user postgres, database postgres/.exec(line);
    if (port) dbPort = Number(port[1]);
    const pid = /postmaster started as Process\[pid=(\d+)/.exec(line);
    if (pid) postmasterPid = Number(pid[1]);
    if (/Listening on: /.test(line)) listening = true;
    waiters = waiters.filter((w) => !w());
  };
  for (const stream of [child.stdout, child.stderr]) {
    let buffer = '';
    stream.setEncoding('utf8');
    stream.on('data', (chunk) => {
      buffer += chunk;
      let i;
      while ((i = buffer.indexOf('\n')) >= 0) {
        onLine(buffer.slice(0, i));
        buffer = buffer.slice(i + 1);
      }
    });
  }
  let exited = false;
  const exit = new Promise((ok) => child.on('exit', (code, signal) => {
    exited = true;
    waiters = waiters.filter((w) => !w());
    ok({ code, signal });
  }));

  const stop = async () => {
    if (!exited) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exit;
      clearTimeout(timer);
    }
    // The embedded PostgreSQL is the service's child; make sure it did not outlive a hard kill.
    if (postmasterPid) {
      try {
        process.kill(postmasterPid, 0);
        process.kill(postmasterPid, 'SIGQUIT');
      } catch {
        // already gone
      }
    }
  };

  try {
    await new Promise((ok, fail) => {
      const timer = setTimeout(() => fail(new Error(`the service did not start within ${startTimeoutMs} ms`)), startTimeoutMs);
      const check = () => {
        if (exited) {
          clearTimeout(timer);
          fail(new Error('the service exited while starting'));
          return true;
        }
        if (listening && dbPort) {
          clearTimeout(timer);
          ok();
          return true;
        }
        return false;
      };
      if (!check()) waiters.push(check);
    });
  } catch (error) {
    await stop();
    error.message += `\n--- service log (tail) ---\n${lines.slice(-60).join('\n')}`;
    throw error;
  }

  return {
    url: `http://127.0.0.1:${httpPort}`,
    healthUrl: `http://127.0.0.1:${managementPort}/q/health/ready`,
    dbUrl: `postgres://postgres:postgres@127.0.0.1:${dbPort}/postgres`,
    pid: child.pid,
    logTail: () => lines.slice(-80).join('\n'),
    stop,
  };
}

const run = promisify(execFile);

/** Builds the `workflow` and `graphile_worker` schemas with the engine package's own setup program. */
export async function setUpEngineSchemas(dbUrl) {
  const setup = fileURLToPath(new URL('../bin/setup.js', import.meta.resolve('@workflow/world-postgres')));
  await run(process.execPath, [setup], {
    env: { ...process.env, WORKFLOW_POSTGRES_URL: dbUrl },
    timeout: 120_000,
  });
}

/** Waits until the service's readiness check (database, migrations, runs table) is UP. */
export async function waitReady(service, timeoutMs = 60_000) {
  const until = Date.now() + timeoutMs;
  for (;;) {
    try {
      const res = await fetch(service.healthUrl, { signal: AbortSignal.timeout(5000) });
      if (res.ok) return;
    } catch {
      // not yet
    }
    if (Date.now() > until) throw new Error(`the service was not ready within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** The service with the engine's schemas built in its database, once it is ready. */
export async function startServiceWithEngine(options) {
  const service = await startService(options);
  await setUpEngineSchemas(service.dbUrl);
  await waitReady(service);
  return service;
}
