import http from 'node:http';
import https from 'node:https';

/**
 * The client's default HTTP transport: node:http(s) over one keep-alive agent per API object,
 * shaped like the subset of `fetch` that RollcallApi uses (`status`, `headers.get`, `text()`).
 *
 * Not the global `fetch`: a replica process makes a few dozen calls during a deploy's pass, and
 * the first `fetch` of a process loads and compiles undici (about 60 ms of CPU), then pays more
 * per call while its code is still cold: 30 calls took 211–235 ms of CPU with `fetch` against
 * 54–69 ms here (`node bench/transport-cpu.mjs`, BENCHMARKS.md §8). Sixteen replicas booting on the cores the database needs pay that
 * sixteen times. A `fetch` option still replaces this transport.
 *
 * Failures reject as `fetch` does: an aborted request (the signal: a timeout or a stop) with the
 * signal's reason, anything else (refused, reset, an answer cut off) with the socket's error.
 */
export function nodeTransport() {
  const agents = {
    'http:': new http.Agent({ keepAlive: true }),
    'https:': new https.Agent({ keepAlive: true }),
  };
  return function request(url, { method, headers, body, signal }) {
    return new Promise((resolve, reject) => {
      const target = new URL(url);
      const lib = target.protocol === 'https:' ? https : http;
      const agent = agents[target.protocol];
      if (!agent) {
        reject(new TypeError(`unsupported protocol ${target.protocol}`));
        return;
      }
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const payload = body == null ? null : Buffer.from(body);
      let settled = false;
      const fail = (error) => {
        if (settled) return;
        settled = true;
        signal?.removeEventListener('abort', onAbort);
        reject(signal?.aborted ? signal.reason : error);
      };
      const onAbort = () => req.destroy(signal.reason);
      const req = lib.request(
        target,
        {
          method,
          agent,
          headers: payload ? { ...headers, 'content-length': payload.length } : headers,
        },
        (res) => {
          const chunks = [];
          res.on('data', (chunk) => chunks.push(chunk));
          res.on('error', fail);
          // Closed before its end: the answer was cut off (or the request aborted meanwhile).
          res.on('close', () => {
            if (!res.complete) fail(Object.assign(new Error('answer cut off'), { code: 'ECONNRESET' }));
          });
          res.on('end', () => {
            if (settled) return;
            settled = true;
            signal?.removeEventListener('abort', onAbort);
            const text = Buffer.concat(chunks).toString('utf8');
            resolve({
              status: res.statusCode,
              headers: { get: (name) => headerValue(res.headers[name.toLowerCase()]) },
              text: async () => text,
            });
          });
        },
      );
      req.on('error', fail);
      signal?.addEventListener('abort', onAbort, { once: true });
      req.end(payload ?? undefined);
    });
  };
}

function headerValue(value) {
  if (value == null) return null;
  return Array.isArray(value) ? value.join(', ') : String(value);
}
