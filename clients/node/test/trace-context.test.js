// Requests carry the W3C trace context of the application's active span, when the application
// uses @opentelemetry/api, so that its trace links to the service's spans of the claim.
import assert from 'node:assert/strict';
import { AsyncLocalStorage } from 'node:async_hooks';
import { createServer } from 'node:http';
import { after, before, test } from 'node:test';
import { ROOT_CONTEXT, context, createTraceState, trace } from '@opentelemetry/api';
import { RollcallApi } from '../src/http.js';
import { traceHeadersOf } from '../src/trace-context.js';

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const SPAN_ID = '00f067aa0ba902b7';

/** What an application's OpenTelemetry SDK installs: the active context follows async calls. */
class AsyncContextManager {
  #storage = new AsyncLocalStorage();
  active() {
    return this.#storage.getStore() ?? ROOT_CONTEXT;
  }
  with(ctx, fn, thisArg, ...args) {
    return this.#storage.run(ctx, () => fn.call(thisArg, ...args));
  }
  bind(_ctx, target) {
    return target;
  }
  enable() {
    return this;
  }
  disable() {
    this.#storage.disable();
    return this;
  }
}

let server;
let api;
const seen = [];

before(async () => {
  assert.ok(context.setGlobalContextManager(new AsyncContextManager()));
  server = createServer((req, res) => {
    seen.push(req.headers);
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ status: 'done', epochId: 1 }));
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  api = new RollcallApi({ url: `http://127.0.0.1:${server.address().port}` });
});

after(() => {
  context.disable();
  return new Promise((r) => server.close(r));
});

/** `fn` inside the application's span of the given context. */
function inSpan(spanContext, fn) {
  return context.with(trace.setSpanContext(context.active(), spanContext), fn);
}

test("a claim made inside the application's span carries that span's traceparent", async () => {
  seen.length = 0;
  await inSpan({ traceId: TRACE_ID, spanId: SPAN_ID, traceFlags: 1 }, () => api.claim('rci_1', 10));
  assert.equal(seen.length, 1);
  assert.equal(seen[0].traceparent, `00-${TRACE_ID}-${SPAN_ID}-01`);
  assert.equal(seen[0].tracestate, undefined);
  assert.equal(seen[0].authorization, 'Bearer rci_1');
});

test('the trace state goes along, and an unsampled span says so', async () => {
  seen.length = 0;
  const traceState = createTraceState('vendor=abc,other=1');
  await inSpan({ traceId: TRACE_ID, spanId: SPAN_ID, traceFlags: 0, traceState }, () =>
    api.complete('rci_1', 7, 1, []),
  );
  assert.equal(seen[0].traceparent, `00-${TRACE_ID}-${SPAN_ID}-00`);
  assert.equal(seen[0].tracestate, 'vendor=abc,other=1');
});

test('without an active span a request carries no trace context', async () => {
  seen.length = 0;
  await api.claim('rci_1', 10);
  assert.equal(seen[0].traceparent, undefined);
  assert.equal(seen[0].tracestate, undefined);
});

test('an invalid span context gives no header', () => {
  assert.deepEqual(traceHeadersOf({ traceId: '0'.repeat(32), spanId: SPAN_ID, traceFlags: 1 }), {});
  assert.deepEqual(traceHeadersOf({ traceId: TRACE_ID, spanId: 'xyz', traceFlags: 1 }), {});
  assert.deepEqual(traceHeadersOf(undefined), {});
});
