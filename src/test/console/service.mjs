// The packaged service as the console test runs it: one `java -jar` process on loopback ports,
// with no database configured, so it starts its embedded PostgreSQL and the seeded `demo`
// namespace. Plus a small client for its public and admin APIs.
import { spawn } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
export const TARGET = join(REPO, 'target');
export const JAR = join(TARGET, 'quarkus-app', 'quarkus-run.jar');
export const HOST = '127.0.0.1';

/** A port nobody listens on right now, on loopback. */
export function freePort() {
  return new Promise((ok, fail) => {
    const server = createServer();
    server.unref();
    server.on('error', fail);
    server.listen(0, HOST, () => {
      const { port } = server.address();
      server.close(() => ok(port));
    });
  });
}

/** True while the process runs (a zombie, exited but not yet reaped, counts as gone). */
function alive(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch (_) {
    return false;
  }
}

/** Sleeps without the event loop, for exit handlers. */
function pause(ms) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

export class Service {
  constructor({ adminToken, httpPort, managementPort, log }) {
    this.adminToken = adminToken;
    this.httpPort = httpPort;
    this.managementPort = managementPort;
    this.logPath = log;
    this.base = `http://${HOST}:${httpPort}`;
    this.child = null;
    this.exited = null; // resolves with the exit code once the process is gone
  }

  /** Starts `java -jar` and waits until readiness answers 200. */
  static async start({ adminToken, readyTimeoutMs = 150_000, extraEnv = {} }) {
    if (!existsSync(JAR)) {
      throw new Error(
        `${JAR} is missing: package the service first (./mvnw -B package -DskipTests, or CI's ./mvnw -B verify)`,
      );
    }
    mkdirSync(TARGET, { recursive: true });
    const service = new Service({
      adminToken,
      httpPort: await freePort(),
      managementPort: await freePort(),
      log: join(TARGET, 'console-test-service.log'),
    });
    await service.#spawn(extraEnv);
    await service.#waitReady(readyTimeoutMs);
    return service;
  }

  async #spawn(extraEnv) {
    // No database settings and no namespaces from the caller's environment: the service must
    // start its embedded PostgreSQL with the seeded demo namespace, which it does only when asked.
    const env = Object.fromEntries(
      Object.entries(process.env).filter(
        ([k]) => !k.startsWith('QUARKUS_DATASOURCE_') && !k.startsWith('ROLLCALL_') && !k.startsWith('QUARKUS_'),
      ),
    );
    Object.assign(env, {
      ROLLCALL_DEMO: 'true',
      ROLLCALL_ADMIN_TOKEN: this.adminToken,
      QUARKUS_HTTP_PORT: String(this.httpPort),
      QUARKUS_HTTP_HOST: HOST,
      QUARKUS_MANAGEMENT_PORT: String(this.managementPort),
      QUARKUS_MANAGEMENT_HOST: HOST,
      ...extraEnv,
    });
    const log = createWriteStream(this.logPath, { flags: 'w' });
    await new Promise((ok) => log.on('open', ok));
    this.child = spawn('java', ['-jar', JAR], {
      cwd: TARGET,
      env,
      // Its own process group, so that stop() can end whatever it started.
      detached: true,
      stdio: ['ignore', log, log],
    });
    this.exited = new Promise((ok) => this.child.on('exit', (code, signal) => ok(code ?? signal)));
    this.child.on('error', () => {});
    // If the test process ends without stop() (a crash, Ctrl-C, the runner's timeout), the
    // service still goes, and so does its database server, which runs in a session of its own.
    this.onExit = () => this.#stopSync();
    this.onSignal = (signal) => {
      this.stop(10_000).finally(() => process.exit(signal === 'SIGINT' ? 130 : 143));
    };
    process.on('exit', this.onExit);
    process.once('SIGINT', this.onSignal);
    process.once('SIGTERM', this.onSignal);
  }

  async #waitReady(timeoutMs) {
    const url = `http://${HOST}:${this.managementPort}/q/health/ready`;
    const deadline = Date.now() + timeoutMs;
    let last = 'no answer yet';
    while (Date.now() < deadline) {
      const gone = await Promise.race([this.exited, sleep(250).then(() => undefined)]);
      if (gone !== undefined) throw new Error(`the service exited (${gone}) before it was ready:\n${this.logTail()}`);
      try {
        const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
        if (res.status === 200) return;
        last = `${res.status} ${await res.text()}`;
      } catch (e) {
        last = e.message;
      }
    }
    throw new Error(`the service was not ready within ${timeoutMs / 1000} s (last: ${last}):\n${this.logTail()}`);
  }

  /** The last lines of the service's log, for failure messages. */
  logTail(lines = 40) {
    try {
      return readFileSync(this.logPath, 'utf8').split('\n').slice(-lines).join('\n');
    } catch (_) {
      return '(no log)';
    }
  }

  #killGroup(signal) {
    if (!this.child || this.child.exitCode !== null || this.child.signalCode !== null) return;
    try {
      process.kill(-this.child.pid, signal);
    } catch (_) {
      try {
        this.child.kill(signal);
      } catch (_) {
        /* already gone */
      }
    }
  }

  /**
   * Stops the service: SIGTERM first, so that it stops its embedded PostgreSQL and removes its
   * data directory; SIGKILL to its process group if it is not gone within graceMs, and then the
   * database server too.
   */
  stop(graceMs = 20_000) {
    // Once only: a second SIGTERM to the group would hit the pg_ctl that the service's shutdown
    // runs to stop its database, and leave the database running.
    this.stopping ??= this.#stop(graceMs);
    return this.stopping;
  }

  async #stop(graceMs) {
    if (!this.child) return;
    this.#killGroup('SIGTERM');
    const gone = await Promise.race([this.exited.then(() => true), sleep(graceMs).then(() => false)]);
    if (!gone) {
      this.#killGroup('SIGKILL');
      await Promise.race([this.exited, sleep(5000)]);
    }
    this.#stopEmbeddedPostgres();
    this.#forget();
  }

  /** stop() for an 'exit' handler, where nothing asynchronous runs any more. */
  #stopSync() {
    if (!this.child) return;
    const pid = this.child.pid;
    if (!this.stopping) this.#killGroup('SIGTERM'); // else stop() sent it already
    const deadline = Date.now() + 10_000;
    while (alive(pid) && Date.now() < deadline) pause(100);
    this.#killGroup('SIGKILL');
    this.#stopEmbeddedPostgres();
    this.#forget();
  }

  #forget() {
    process.off('exit', this.onExit);
    process.off('SIGINT', this.onSignal);
    process.off('SIGTERM', this.onSignal);
    this.child = null;
  }

  /**
   * The embedded PostgreSQL outlives a killed JVM (pg_ctl starts it in a session of its own).
   * Its data directory is in the service's log, its pid in that directory: stop it at once and
   * remove the directory. Nothing to do after a clean shutdown, which removed the directory.
   */
  #stopEmbeddedPostgres() {
    let dir;
    try {
      dir = readFileSync(this.logPath, 'utf8').match(/existing directory (\/[^\s"\\]*epg\d+)/)?.[1];
    } catch (_) {
      return;
    }
    if (!dir || !existsSync(dir)) return;
    try {
      const pid = Number(readFileSync(join(dir, 'postmaster.pid'), 'utf8').split('\n')[0]);
      if (pid > 1) {
        process.kill(pid, 'SIGQUIT'); // PostgreSQL's immediate shutdown
        const deadline = Date.now() + 5000;
        while (alive(pid) && Date.now() < deadline) pause(100);
        if (alive(pid)) process.kill(pid, 'SIGKILL');
      }
    } catch (_) {
      /* no pid file, or already gone */
    }
    rmSync(dir, { recursive: true, force: true });
  }

  // -----------------------------------------------------------------------------------------------
  // HTTP

  async request(method, path, { token, body, expect } = {}) {
    const headers = { Accept: 'application/json' };
    if (token) headers.Authorization = `Bearer ${token}`;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const res = await fetch(this.base + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(15_000),
    });
    const text = await res.text();
    const json = text ? JSON.parse(text) : null;
    if (expect !== undefined && res.status !== expect) {
      throw new Error(`${method} ${path}: expected ${expect}, got ${res.status}: ${text}`);
    }
    return { status: res.status, body: json };
  }

  /** GET on the admin API, which must answer 200. */
  async admin(path) {
    return (await this.request('GET', `/admin/${path}`, { token: this.adminToken, expect: 200 })).body;
  }

  /** Registers an instance of the demo namespace; returns {instanceId, token, …}. */
  async register(name, deploymentId, secret = 'demo-secret') {
    const { body } = await this.request('POST', '/instances', {
      token: secret,
      body: { namespace: 'demo', deploymentId, name },
      expect: 201,
    });
    return body;
  }

  /** One claim; must hand out a batch. */
  async claimBatch(instance, maxRuns = 100) {
    const { body } = await this.request('POST', '/recovery/claim', {
      token: instance.token,
      body: { maxRuns },
      expect: 200,
    });
    if (body.status !== 'batch') throw new Error(`expected a batch, got ${JSON.stringify(body)}`);
    return body.batch;
  }

  async complete(instance, batch) {
    const { body } = await this.request('POST', `/recovery/batches/${batch.id}/complete`, {
      token: instance.token,
      body: { fence: batch.fence },
      expect: 200,
    });
    return body;
  }
}
