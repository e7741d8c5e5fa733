/**
 * Every refusal or failure of the Rollcall service surfaces as a RollcallError: the problem's
 * stable `type`, its HTTP `status` and `detail`. A service that cannot be reached at all is a
 * RollcallError too, with the client's own type `urn:rollcall:client:unreachable` and status 0.
 */

export const PROBLEM_PREFIX = 'urn:rollcall:problem:';
export const UNREACHABLE = 'urn:rollcall:client:unreachable';
export const BAD_RESPONSE = 'urn:rollcall:client:bad-response';

// The calls made with an instance's token: a 401 to one of them means the service no longer knows
// the instance (its record is gone), unlike a 401 to a registration (a wrong secret).
const INSTANCE_CALLS = new Set(['claim', 'complete', 'heartbeat', 'leave']);

export class RollcallError extends Error {
  /**
   * @param {object} fields
   * @param {string} fields.type problem type (`urn:rollcall:problem:<slug>`) or a client type
   * @param {number} fields.status HTTP status; 0 when no answer came
   * @param {string} [fields.title]
   * @param {string} [fields.detail]
   * @param {object} [fields.problem] the whole problem document
   * @param {string} [fields.operation] what the client was doing (`register`, `claim`, ...)
   * @param {number|null} [fields.retryAfterMs] how long a 429 or 503 answer asked to wait
   * @param {unknown} [fields.cause]
   */
  constructor({ type, status, title, detail, problem, operation, retryAfterMs = null, cause }) {
    const what = operation ? `${operation}: ` : '';
    super(`${what}${status ? status + ' ' : ''}${type}${detail ? ` (${detail})` : ''}`, { cause });
    this.name = 'RollcallError';
    this.type = type;
    this.status = status;
    this.title = title;
    this.detail = detail;
    this.problem = problem;
    this.operation = operation;
    /** How long the service (or a proxy) asked to wait before trying again, in ms; null when it did not say. */
    this.retryAfterMs = retryAfterMs;
  }

  /** The slug of a service problem type (`stale-fence`), or the client type itself. */
  get slug() {
    return this.type.startsWith(PROBLEM_PREFIX) ? this.type.slice(PROBLEM_PREFIX.length) : this.type;
  }

  /** True for what is worth retrying with backoff: no answer at all, a 429 (rate limited), or a 5xx. */
  get retryable() {
    return this.status === 0 || this.status === 429 || this.status >= 500;
  }

  /**
   * True when the service says the instance is no longer live: it is fenced and must register
   * again as a new one. That is a 410 (it left or missed its lease), or a 401 to a call made with
   * the instance's token (its record is gone, so the token is unknown).
   */
  get gone() {
    return this.status === 410 || (this.status === 401 && INSTANCE_CALLS.has(this.operation));
  }
}
