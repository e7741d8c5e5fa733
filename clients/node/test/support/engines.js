// The engine lines the world module is tested on. 4.3.7 is this package's dev dependency; the 5.0
// beta is the repository's pinned fixture (src/test/engine-beta: manifest, lockfile and the
// overrides it needs), installed once into node_modules/.rollcall-engine-beta with npm install;
// src/test/engine-beta-27 is the oldest beta the client supports, and
// src/test/engine-beta-graphile-0.18 the newest with graphile-worker's newest release.
import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const here = dirname(fileURLToPath(import.meta.url));
const CLIENT = resolve(here, '../..');
const NPM_INSTALL = resolve(CLIENT, '../../src/test/npm-install.mjs');
const run = promisify(execFile);

/** The directory of this package (an application with world-postgres 4.3.7 installed). */
export const STABLE_APP_DIR = CLIENT;

/**
 * Installs the 5.0 beta fixture (unless the same lockfile is installed already) and returns its
 * directory: an application directory whose node_modules hold @workflow/world-postgres 5.0.0-beta.29.
 */
export function installBetaApp() {
  return installFixture('engine-beta', '.rollcall-engine-beta');
}

/** The oldest 5.0 beta the client supports, 5.0.0-beta.27 (src/test/engine-beta-27). */
export function installBeta27App() {
  return installFixture('engine-beta-27', '.rollcall-engine-beta-27');
}

/**
 * The 5.0 beta fixture with graphile-worker 0.18.0 instead of the 0.16.6 world-postgres pins
 * (src/test/engine-beta-graphile-0.18), installed the same way.
 */
export function installGraphile18App() {
  return installFixture('engine-beta-graphile-0.18', '.rollcall-engine-beta-graphile-0.18');
}

async function installFixture(fixture, into) {
  const from = resolve(CLIENT, '../../src/test', fixture);
  const dir = resolve(CLIENT, 'node_modules', into);
  const lock = readFileSync(resolve(from, 'package-lock.json'), 'utf8');
  const stamp = resolve(dir, '.installed-lockfile');
  if (existsSync(stamp) && readFileSync(stamp, 'utf8') === lock) return dir;
  mkdirSync(dir, { recursive: true });
  copyFileSync(resolve(from, 'package.json'), resolve(dir, 'package.json'));
  copyFileSync(resolve(from, 'package-lock.json'), resolve(dir, 'package-lock.json'));
  // Not `npm ci`: see README (the registry lacks cbor-extract's optional platform packages). The
  // repository's npm-install script tries npm again when it failed on the network.
  await run(process.execPath, [NPM_INSTALL, '--no-save'], { cwd: dir, timeout: 1_200_000 });
  writeFileSync(stamp, lock);
  return dir;
}

/** The version of @workflow/world-postgres an application directory resolves. */
export function worldPostgresVersion(appDir) {
  return JSON.parse(readFileSync(resolve(appDir, 'node_modules/@workflow/world-postgres/package.json'), 'utf8')).version;
}

/** The version of graphile-worker an application directory resolves. */
export function graphileWorkerVersion(appDir) {
  return JSON.parse(readFileSync(resolve(appDir, 'node_modules/graphile-worker/package.json'), 'utf8')).version;
}
