const LEVELS = { debug: 10, info: 20, warn: 30, error: 40 };

/**
 * The default logger: one JSON object per line on stderr,
 * `{"time":"…","level":"warn","logger":"rollcall","msg":"…", …fields}`.
 *
 * @param {object} [options]
 * @param {'debug'|'info'|'warn'|'error'} [options.level] the lowest level written (default info,
 *   or ROLLCALL_LOG_LEVEL)
 * @param {{write(s: string): unknown}} [options.stream]
 */
export function jsonLogger({ level = process.env.ROLLCALL_LOG_LEVEL || 'info', stream = process.stderr } = {}) {
  const min = LEVELS[level] ?? LEVELS.info;
  const write = (lvl) => (msg, fields) => {
    if (LEVELS[lvl] < min) return;
    const line = { time: new Date().toISOString(), level: lvl, logger: 'rollcall', msg, ...serialisable(fields) };
    stream.write(JSON.stringify(line) + '\n');
  };
  return { debug: write('debug'), info: write('info'), warn: write('warn'), error: write('error') };
}

/** A logger that drops everything (`logger: false`). */
export const silentLogger = { debug() {}, info() {}, warn() {}, error() {} };

/** Accepts a logger object (pino, console, …), `false`, or nothing. */
export function toLogger(logger) {
  if (logger === false) return silentLogger;
  if (logger == null) return jsonLogger();
  const pick = (name, fallback) =>
    typeof logger[name] === 'function' ? logger[name].bind(logger) : fallback;
  const info = pick('info', () => {});
  return { debug: pick('debug', () => {}), info, warn: pick('warn', info), error: pick('error', info) };
}

function serialisable(fields) {
  if (!fields) return {};
  const out = {};
  for (const [k, v] of Object.entries(fields)) {
    out[k] = v instanceof Error ? errorFields(v) : v;
  }
  return out;
}

function errorFields(e) {
  const out = { name: e.name, message: e.message };
  for (const k of ['type', 'status', 'detail', 'code']) if (e[k] !== undefined) out[k] = e[k];
  return out;
}
