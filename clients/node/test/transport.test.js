// The built-in node:http transport against a local HTTP server: answers, problems, timeouts,
// aborts, refused connections and answers cut off all reach RollcallApi as they do over fetch.
import assert from 'node:assert/strict';
import http from 'node:http';
import { test } from 'node:test';
import { RollcallApi } from '../src/index.js';

async function server(handler) {
  const seen = [];
  const s = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      seen.push({ method: req.method, url: req.url, headers: req.headers, body, socket: req.socket });
      handler(req, res, body);
    });
  });
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${s.address().port}`;
  return {
    url,
    seen,
    close: () => {
      s.closeAllConnections();
      return new Promise((r) => s.close(r));
    },
  };
}

test('transport: a claim is a JSON POST with the bearer token; the answer is parsed; sockets are kept alive', async () => {
  const srv = await server((req, res, body) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ status: 'wait', retryAfterMs: 300, echo: JSON.parse(body) }));
  });
  try {
    const api = new RollcallApi({ url: srv.url + '/' });
    const first = await api.claim('rci_token', 2000, { waitMs: 20000 });
    const second = await api.claim('rci_token', 10);
    assert.deepEqual(first, { status: 'wait', retryAfterMs: 300, echo: { maxRuns: 2000, waitMs: 20000 } });
    assert.deepEqual(second.echo, { maxRuns: 10 });
    assert.equal(srv.seen[0].method, 'POST');
    assert.equal(srv.seen[0].url, '/recovery/claim');
    assert.equal(srv.seen[0].headers.authorization, 'Bearer rci_token');
    assert.equal(srv.seen[0].headers['content-type'], 'application/json');
    assert.equal(Number(srv.seen[0].headers['content-length']), Buffer.byteLength(srv.seen[0].body));
    // The second call reused the first one's connection.
    assert.equal(srv.seen[1].socket, srv.seen[0].socket);
  } finally {
    await srv.close();
  }
});

test('transport: a 204 is null, a problem document is a RollcallError, Retry-After is read', async () => {
  const answers = [
    (res) => res.writeHead(204).end(),
    (res) =>
      res
        .writeHead(410, { 'content-type': 'application/problem+json' })
        .end(JSON.stringify({ type: 'urn:rollcall:problem:instance-gone', status: 410, detail: 'gone' })),
    (res) => res.writeHead(503, { 'retry-after': '2' }).end('<html>busy</html>'),
  ];
  const srv = await server((req, res) => answers.shift()(res));
  try {
    const api = new RollcallApi({ url: srv.url });
    assert.equal(await api.leave('rci_t', 'i-1', null), null);
    const gone = await api.heartbeat('rci_t', 'i-1', null, 1000).catch((e) => e);
    assert.equal(gone.type, 'urn:rollcall:problem:instance-gone');
    assert.equal(gone.status, 410);
    assert.equal(gone.detail, 'gone');
    const busy = await api.complete('rci_t', 7, 1, []).catch((e) => e);
    assert.equal(busy.status, 503);
    assert.equal(busy.retryAfterMs, 2000);
    assert.equal(busy.type, 'urn:rollcall:client:bad-response');
  } finally {
    await srv.close();
  }
});

test('transport: no answer within the deadline, a stop, a refused connection and a cut answer are unreachable', async () => {
  const srv = await server((req, res) => {
    if (req.url === '/recovery/batches/1/complete') {
      // Headers and half a body, then the connection drops.
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
      res.write('{"status":');
      setTimeout(() => res.socket.destroy(), 20);
    }
    // Anything else is never answered.
  });
  try {
    const api = new RollcallApi({ url: srv.url, requestTimeoutMs: 150 });
    const t0 = Date.now();
    const late = await api.heartbeat('rci_t', 'i-1', null, 150).catch((e) => e);
    assert.equal(late.type, 'urn:rollcall:client:unreachable');
    assert.equal(late.status, 0);
    assert.match(late.detail, /no answer within 150 ms/);
    assert.ok(Date.now() - t0 < 2000);

    const stop = new AbortController();
    const held = api.claim('rci_t', 10, { waitMs: 20000, signal: stop.signal }).catch((e) => e);
    setTimeout(() => stop.abort(), 50);
    const stopped = await held;
    assert.equal(stopped.type, 'urn:rollcall:client:unreachable');

    const cut = await api.complete('rci_t', 1, 1, []).catch((e) => e);
    assert.equal(cut.type, 'urn:rollcall:client:unreachable');
    assert.equal(cut.status, 0);
  } finally {
    await srv.close();
  }
  const closed = await server(() => {});
  const port = new URL(closed.url).port;
  await closed.close();
  const refused = await new RollcallApi({ url: `http://127.0.0.1:${port}` }).claim('rci_t', 1).catch((e) => e);
  assert.equal(refused.type, 'urn:rollcall:client:unreachable');
  assert.equal(refused.detail, 'ECONNREFUSED');
});
