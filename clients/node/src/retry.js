// Pauses between tries: the service's own hint when it gives one, else exponential backoff with
// jitter; and a sleep that stopping cuts short.

// Backoff of registration, claims and completes: exponential from BASE, capped at MAX, jittered.
const BACKOFF_BASE_MS = 250;
const BACKOFF_MAX_MS = 5_000;

/** The longest pause a hint can impose: a proxy's `Retry-After` of an hour is not waited out. */
export const RETRY_AFTER_MAX_MS = 60_000;

/** Exponential backoff with jitter: between half and all of min(max, base * 2^(attempt-1)). */
export function backoff(attempt, base = BACKOFF_BASE_MS, max = BACKOFF_MAX_MS) {
  const ceiling = Math.min(max, base * 2 ** Math.min(attempt - 1, 20));
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

/**
 * A `Retry-After` header in milliseconds: delay-seconds (`"2"`), or an HTTP date read against
 * `nowMs` (the wall clock, the only one a date can be read against). Null when absent or unreadable.
 */
export function parseRetryAfter(value, nowMs = Date.now()) {
  if (value == null) return null;
  const text = String(value).trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  // Every HTTP date names its day or month; a bare number with a dot is no date.
  if (!/[a-z]/i.test(text)) return null;
  const at = Date.parse(text);
  return Number.isNaN(at) ? null : Math.max(0, at - nowMs);
}

/**
 * How long a 429 or 503 answer asks the client to wait before its next try, in milliseconds:
 * the problem's `retryAfterMs` (the service's exact figure), else the `Retry-After` header (which
 * the service rounds up to whole seconds; a proxy may send only the header). Null for any other
 * status, or when neither says.
 */
export function retryAfterOf(status, header, problem, nowMs = Date.now()) {
  if (status !== 429 && status !== 503) return null;
  const ms = problem?.retryAfterMs;
  if (Number.isFinite(ms) && ms >= 0) return ms;
  return parseRetryAfter(header, nowMs);
}

/**
 * The pause before try `attempt + 1` after `error` failed try `attempt`: the service's hint when it
 * gave one (at most RETRY_AFTER_MAX_MS), else backoff.
 */
export function retryDelay(error, attempt) {
  const hint = error?.retryAfterMs;
  return Number.isFinite(hint) && hint >= 0 ? Math.min(hint, RETRY_AFTER_MAX_MS) : backoff(attempt);
}

/** Sleeps `ms`, or less when `signal` aborts (at once if it already has). Never rejects. */
export function sleep(ms, signal) {
  if (signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
