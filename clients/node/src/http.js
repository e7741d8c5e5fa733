import { BAD_RESPONSE, RollcallError, UNREACHABLE } from './errors.js';
import { retryAfterOf } from './retry.js';
import { activeTraceHeaders } from './trace-context.js';
import { nodeTransport } from './transport.js';

/**
 * The service's five calls, over node:http ({@link nodeTransport}) unless a `fetch` is given. Every answer that is not a success becomes a
 * RollcallError (the problem document's type, status and detail); no answer at all (connection
 * refused, reset, timeout) is a RollcallError with status 0 and type `urn:rollcall:client:unreachable`.
 * A 429 or 503 carries how long it asked to wait (`retryAfterMs`: the problem's own figure, else
 * the `Retry-After` header). Each request carries the W3C `traceparent` of the application's active
 * span when it has `@opentelemetry/api` ({@link activeTraceHeaders}).
 */
export class RollcallApi {
  /**
   * @param {object} options
   * @param {string} options.url the service's base URL
   * @param {typeof fetch} [options.fetch] replaces the built-in node:http transport
   * @param {number} [options.requestTimeoutMs] deadline of one request
   * @param {() => Promise<object>} [options.traceHeaders] the trace headers of a request
   */
  constructor({
    url,
    fetch: fetchImpl = nodeTransport(),
    requestTimeoutMs = 10_000,
    traceHeaders = activeTraceHeaders,
  }) {
    if (typeof url !== 'string' || url === '') throw new TypeError('url is required');
    if (typeof fetchImpl !== 'function') throw new TypeError('no fetch implementation');
    this.base = url.replace(/\/+$/, '');
    this.fetch = fetchImpl;
    this.requestTimeoutMs = requestTimeoutMs;
    this.traceHeaders = traceHeaders;
  }

  register(secret, body) {
    return this.#call('register', 'POST', '/instances', secret, body, [201]);
  }

  /**
   * @param {object} [hold] `waitMs`: let the service hold the answer that long while it has
   *   nothing to hand out; `idle`: hold a `done` answer too (waiting for takeovers); `signal`
   *   aborts the request (stopping).
   */
  claim(token, maxRuns, { waitMs = 0, idle = false, signal } = {}) {
    const body = maxRuns ? { maxRuns } : {};
    if (waitMs > 0) body.waitMs = waitMs;
    if (idle) body.idle = true;
    return this.#call('claim', 'POST', '/recovery/claim', token, body, [200], this.requestTimeoutMs + waitMs, signal);
  }

  complete(token, batchId, fence, failedRunIds) {
    const body = failedRunIds.length ? { fence, failedRunIds } : { fence };
    return this.#call('complete', 'POST', `/recovery/batches/${batchId}/complete`, token, body, [200]);
  }

  heartbeat(token, instanceId, inFlight, timeoutMs, sessionLock, workerIds) {
    const body = inFlight ? { inFlight } : {};
    if (sessionLock) body.sessionLock = sessionLock;
    if (workerIds?.length) body.workerIds = workerIds;
    return this.#call(
      'heartbeat',
      'POST',
      `/instances/${encodeURIComponent(instanceId)}/heartbeat`,
      token,
      body,
      [200],
      timeoutMs,
    );
  }

  leave(token, instanceId, inFlight, { exiting = false } = {}) {
    const body = inFlight ? { inFlight } : {};
    if (exiting) body.exiting = true;
    return this.#call('leave', 'DELETE', `/instances/${encodeURIComponent(instanceId)}`, token, body, [204]);
  }

  async #call(operation, method, path, bearer, body, ok, timeoutMs = this.requestTimeoutMs, signal = undefined) {
    let response;
    try {
      const trace = await this.traceHeaders();
      response = await this.fetch(this.base + path, {
        method,
        headers: {
          ...trace,
          authorization: `Bearer ${bearer}`,
          'content-type': 'application/json',
          accept: 'application/json, application/problem+json',
        },
        body: JSON.stringify(body),
        signal: signal ? AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]) : AbortSignal.timeout(timeoutMs),
      });
    } catch (cause) {
      const timedOut = cause?.name === 'TimeoutError' || cause?.name === 'AbortError';
      throw new RollcallError({
        type: UNREACHABLE,
        status: 0,
        detail: timedOut
          ? `no answer within ${timeoutMs} ms`
          : String(cause?.cause?.code ?? cause?.code ?? cause?.message ?? cause),
        operation,
        cause,
      });
    }
    let text;
    try {
      text = await response.text();
    } catch (cause) {
      throw new RollcallError({ type: UNREACHABLE, status: 0, detail: 'answer cut off', operation, cause });
    }
    if (ok.includes(response.status)) {
      if (response.status === 204 || text === '') return null;
      try {
        return JSON.parse(text);
      } catch (cause) {
        throw new RollcallError({ type: BAD_RESPONSE, status: response.status, detail: 'not JSON', operation, cause });
      }
    }
    let problem = null;
    try {
      problem = text ? JSON.parse(text) : null;
    } catch {
      // A proxy's HTML error page, say: keep the status, note the body was no problem document.
    }
    const retryAfterMs = retryAfterOf(response.status, response.headers?.get?.('retry-after'), problem);
    if (problem && typeof problem === 'object' && typeof problem.type === 'string') {
      throw new RollcallError({
        type: problem.type,
        status: response.status,
        title: problem.title,
        detail: problem.detail,
        problem,
        operation,
        retryAfterMs,
      });
    }
    throw new RollcallError({
      type: BAD_RESPONSE,
      status: response.status,
      detail: `HTTP ${response.status} without a problem document`,
      operation,
      retryAfterMs,
    });
  }
}
