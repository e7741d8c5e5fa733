#!/usr/bin/env node
// `npm install --no-audit --no-fund [arguments]` in the current directory, tried again when npm
// failed on the network: a connection reset or aborted mid-body, a timeout, a failed name lookup,
// or a 429/5xx answer from the registry. npm retries some requests itself (fetch-retries), but not
// a response body cut off while it is read ("Invalid response body ... ECONNABORTED"), which is
// what a flaky registry connection usually looks like. Any other failure (a missing package, an
// integrity mismatch, a script that failed) ends the run at once with npm's exit code.
//
// Used by every place the repository installs npm packages: the Java suite's engine fixtures and
// example application, the Node client's beta fixture, and .ci/run.
//
// Environment: ROLLCALL_NPM_ATTEMPTS (default 4) and ROLLCALL_NPM_RETRY_DELAY_MS (the first pause,
// default 5000; each later pause is three times the one before).
import { spawn } from 'node:child_process';
import { pathToFileURL } from 'node:url';

const NETWORK_CODES = [
  'ECONNRESET',
  'ECONNABORTED',
  'ECONNREFUSED',
  'ETIMEDOUT',
  'ESOCKETTIMEDOUT',
  'EAI_AGAIN',
  'ENOTFOUND',
  'ENETUNREACH',
  'EHOSTUNREACH',
  'EPIPE',
];

/**
 * The network failure npm's output reports (its error code, or the message when npm gave no code),
 * or null when npm failed for another reason. Only npm's own error lines are read, so a package's
 * install script that prints one of these words does not make its failure look transient.
 */
export function networkFailure(output) {
  for (const line of output.split(/\r?\n/)) {
    const m = /^npm (?:error|ERR!) (.*)$/.exec(line);
    if (!m) continue;
    const text = m[1];
    const code = /^code (E[A-Z0-9_]+)\s*$/.exec(text);
    if (code) {
      if (NETWORK_CODES.includes(code[1]) || /^E(429|5\d\d)$/.test(code[1])) return code[1];
      continue;
    }
    if (/Invalid response body|socket hang up|network (?:request|timeout)/i.test(text)) return text.trim();
  }
  return null;
}

function npmOnce(args) {
  return new Promise((resolveAttempt, reject) => {
    const windows = process.platform === 'win32';
    const child = spawn(windows ? 'npm.cmd' : 'npm', ['install', '--no-audit', '--no-fund', ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      shell: windows,
    });
    let output = '';
    child.stdout.on('data', (chunk) => {
      output += chunk;
      process.stdout.write(chunk);
    });
    child.stderr.on('data', (chunk) => {
      output += chunk;
      process.stderr.write(chunk);
    });
    child.on('error', reject);
    child.on('close', (code, signal) => resolveAttempt({ code: code ?? (signal ? 1 : 0), output }));
  });
}

async function main() {
  const attempts = Number(process.env.ROLLCALL_NPM_ATTEMPTS ?? 4);
  let delay = Number(process.env.ROLLCALL_NPM_RETRY_DELAY_MS ?? 5000);
  for (let attempt = 1; ; attempt++) {
    const { code, output } = await npmOnce(process.argv.slice(2));
    if (code === 0) return 0;
    const failure = networkFailure(output);
    if (failure === null || attempt >= attempts) {
      if (failure !== null) {
        console.error(`npm-install: npm install failed on the network (${failure}) ${attempt} times; giving up`);
      }
      return code;
    }
    console.error(
      `npm-install: npm install failed on the network (${failure}); attempt ${attempt + 1} of ${attempts} in ${delay} ms`,
    );
    await new Promise((r) => setTimeout(r, delay));
    delay *= 3;
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().then(
    (code) => process.exit(code),
    (e) => {
      console.error(`npm-install: ${e.message}`);
      process.exit(1);
    },
  );
}
