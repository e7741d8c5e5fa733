// Child processes of the tests and the benchmark: each one is tracked so that nothing outlives a
// failed test, and each reports JSON lines that can be awaited.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const CLIENT = fileURLToPath(new URL('./client-process.mjs', import.meta.url));
const live = new Set();

/** Kills (SIGKILL) every child still running. */
export function killAll() {
  for (const child of live) {
    try {
      child.kill('SIGKILL');
    } catch {
      // gone
    }
  }
}

process.on('exit', killAll);

/**
 * Starts a node program as a child, collects its JSON stdout lines and exposes
 * `waitFor(event)`, `exited` (promise of {code, signal, events}), `send(line)` and `kill(signal)`.
 */
export function spawnNode(script, { env = {}, args = [], timeoutMs = 120_000, cwd } = {}) {
  const child = spawn(process.execPath, [script, ...args], {
    cwd,
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  live.add(child);
  const events = [];
  let stderr = '';
  let waiters = [];
  let buffer = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk) => {
    buffer += chunk;
    let i;
    while ((i = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, i);
      buffer = buffer.slice(i + 1);
      try {
        events.push(JSON.parse(line));
      } catch {
        events.push({ event: 'text', line });
      }
      waiters = waiters.filter((w) => !w());
    }
  });
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk) => {
    stderr = (stderr + chunk).slice(-20_000);
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  let done = false;
  const exited = new Promise((ok) =>
    child.on('exit', (code, signal) => {
      done = true;
      clearTimeout(timer);
      live.delete(child);
      waiters = waiters.filter((w) => !w());
      ok({ code, signal, events, stderr });
    }),
  );
  return {
    child,
    events,
    exited,
    get stderr() {
      return stderr;
    },
    send(line) {
      child.stdin.write(line + '\n');
    },
    kill(signal = 'SIGKILL') {
      child.kill(signal);
    },
    /** Resolves with the first event named `name` (already seen or to come). */
    waitFor(name, ms = 60_000) {
      return new Promise((ok, fail) => {
        const t = setTimeout(() => fail(new Error(`no '${name}' event within ${ms} ms; stderr: ${stderr.slice(-2000)}`)), ms);
        const check = () => {
          const e = events.find((x) => x.event === name);
          if (e) {
            clearTimeout(t);
            ok(e);
            return true;
          }
          if (done) {
            clearTimeout(t);
            fail(new Error(`exited before '${name}'; stderr: ${stderr.slice(-2000)}`));
            return true;
          }
          return false;
        };
        if (!check()) waiters.push(check);
      });
    },
  };
}

/** One replica (client-process.mjs) with the given configuration. */
export function spawnClient(config, options = {}) {
  return spawnNode(CLIENT, { ...options, env: { ...options.env, ROLLCALL_CLIENT_CONFIG: JSON.stringify(config) } });
}

/** The result line of a replica that ran to the end, or an error with its stderr. */
export async function resultOf(proc) {
  const { code, signal, events, stderr } = await proc.exited;
  const result = events.find((e) => e.event === 'result');
  if (code !== 0 || !result) {
    throw new Error(`client exited with ${code ?? signal} and no result; stderr:\n${stderr.slice(-3000)}`);
  }
  return result;
}
