import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import { RollcallError } from './errors.js';
import { graphileEnqueuer } from './graphile.js';
import { RollcallApi } from './http.js';
import { toLogger } from './log.js';
import { SessionLock, sessionConnector } from './session-lock.js';
import { toInFlightSource } from './tracker.js';

const DEFAULTS = {
  registerDeadlineMs: 30_000,
  requestTimeoutMs: 10_000,
  stopTimeoutMs: 10_000,
  fallback: 'skip',
  rejoin: true,
  jobPrefix: 'workflow_',
  completeAttempts: 5,
};

/** The service accepts at most this many in-flight entries in one heartbeat. */
export const MAX_IN_FLIGHT = 10_000;

// Backoff of registration, claims and completes: exponential from BASE, capped at MAX, jittered.
const BACKOFF_BASE_MS = 250;
const BACKOFF_MAX_MS = 5_000;

// How long the service may hold one claim that has nothing to hand out yet (its
// rollcall.claim.max-wait is 30 s by default); it answers at once when work appears.
const CLAIM_WAIT_MS = 20_000;

const now = () => performance.now();

/**
 * Starts taking part in Rollcall's shared recovery and returns its handle at once; everything
 * else happens in the background. See README.md for every option and event.
 */
export function startRecovery(options) {
  const client = new RecoveryClient(options);
  client.start();
  return client;
}

/** The handle `startRecovery` returns. */
export class RecoveryClient {
  #o;
  #api;
  #log;
  #enqueue;
  #inFlight;
  #listeners = new Map();
  #counters = {
    registrations: 0,
    claims: 0,
    batches: 0,
    runsEnqueued: 0,
    runFailures: 0,
    waits: 0,
    epochsDone: 0,
    leaseRenewals: 0,
    heartbeatFailures: 0,
    fencedEvents: 0,
    completesRefused: 0,
    fallbacks: 0,
  };
  #state = 'new';
  #session = null;
  #claiming = null;
  #claimAgain = false;
  #claimingSession = null;
  #stopping = false;
  #stopPromise = null;
  #wake = new AbortController();
  // This deploy's pass is done: claims wait for takeovers and sweeps.
  #idle = false;
  #settleRecovered;
  #recoveredSettled = false;
  #unhook = [];
  #connectSession;

  /** Resolves once, with how this boot's recovery ended; never rejects. */
  recovered;

  constructor(options) {
    const o = { ...DEFAULTS, ...options };
    for (const key of ['url', 'namespace', 'registrationSecret', 'deploymentId']) {
      if (typeof o[key] !== 'string' || o[key] === '') {
        throw new TypeError(`startRecovery: option ${key} is required`);
      }
    }
    if (!['skip', 'local'].includes(o.fallback)) {
      throw new TypeError("startRecovery: fallback is 'skip' or 'local'");
    }
    if (o.fallback === 'local' && typeof o.localRecovery !== 'function') {
      throw new TypeError("startRecovery: fallback 'local' needs a localRecovery function");
    }
    if ((o.enqueue == null) === (o.pool == null)) {
      throw new TypeError('startRecovery: give exactly one of enqueue (a function) or pool (a pg Pool)');
    }
    if (o.maxRuns != null && !(Number.isInteger(o.maxRuns) && o.maxRuns >= 1 && o.maxRuns <= 5000)) {
      throw new TypeError('startRecovery: maxRuns is an integer from 1 to 5000');
    }
    this.#o = o;
    this.#o.name ??= `${hostname()}-${process.pid}`;
    this.#api = new RollcallApi({ url: o.url, fetch: o.fetch, requestTimeoutMs: o.requestTimeoutMs });
    this.#log = toLogger(o.logger);
    this.#enqueue =
      typeof o.enqueue === 'function'
        ? o.enqueue
        : graphileEnqueuer({ pool: o.pool, jobPrefix: o.jobPrefix, schema: o.graphileSchema });
    this.#inFlight = toInFlightSource(o.inFlight);
    this.#connectSession = sessionConnector(o);
    this.recovered = new Promise((resolve) => {
      this.#settleRecovered = resolve;
    });
  }

  // ---------------------------------------------------------------- public surface

  /** The in-flight tracker heartbeats read (null when `inFlight` was a function). */
  get tracker() {
    return this.#inFlight.tracker;
  }

  /** A copy of the counters. */
  get stats() {
    return { ...this.#counters };
  }

  /**
   * `new`, `registering`, `active` (registered, lease held), `fenced` (lease lost, registering
   * again), `fallback` (boot fallback ran, not registered), `failed` (refused at registration),
   * `stopping`, `stopped`.
   */
  get state() {
    return this.#state;
  }

  /**
   * The session lock of the current registration: `held`, `lost` (reconnecting), `unavailable`
   * (the service keeps the lease for this instance), or `off` (no connection string, or disabled).
   */
  get sessionLock() {
    const lock = this.#session && !this.#session.closed ? this.#session.lock : null;
    return lock ? lock.state : 'off';
  }

  /** The current instance id, or null while not registered. */
  get instanceId() {
    return this.#session && !this.#session.closed ? this.#session.instanceId : null;
  }

  /** Adds a listener; returns a function that removes it. */
  on(event, fn) {
    if (!this.#listeners.has(event)) this.#listeners.set(event, new Set());
    this.#listeners.get(event).add(fn);
    return () => this.off(event, fn);
  }

  off(event, fn) {
    this.#listeners.get(event)?.delete(fn);
  }

  once(event, fn) {
    const off = this.on(event, (payload) => {
      off();
      fn(payload);
    });
    return off;
  }

  start() {
    if (this.#state !== 'new') return;
    this.#state = 'registering';
    const { signal, handleSignals } = this.#o;
    if (signal) {
      if (signal.aborted) {
        queueMicrotask(() => this.stop());
      } else {
        const onAbort = () => this.stop();
        signal.addEventListener('abort', onAbort, { once: true });
        this.#unhook.push(() => signal.removeEventListener('abort', onAbort));
      }
    }
    if (handleSignals) {
      const names = handleSignals === true ? ['SIGTERM', 'SIGINT'] : [].concat(handleSignals);
      for (const name of names) this.#hookSignal(name);
    }
    this.#boot().catch((error) => this.#log.error('rollcall client crashed', { error }));
  }

  /**
   * Stops claiming, lets the batch in hand finish (at most `stopTimeoutMs`), stops heartbeats and
   * leaves with the last in-flight set. Safe to call more than once.
   */
  stop({ exiting = false } = {}) {
    this.#stopPromise ??= this.#doStop({ exiting });
    return this.#stopPromise;
  }

  // ---------------------------------------------------------------- boot and fallback

  async #boot() {
    const deadline = now() + this.#o.registerDeadlineMs;
    try {
      await this.#registerWithBackoff(deadline);
    } catch (error) {
      if (this.#stopping) return;
      if (error instanceof RollcallError && !error.retryable) {
        this.#state = 'failed';
        this.#log.error('rollcall refused the registration; no recovery runs for this boot', { error });
        this.#emit('failed', { error });
        this.#settle({ status: 'failed', error });
        return;
      }
      await this.#fallback(error);
      if (this.#o.fallback === 'local' || !this.#o.rejoin || this.#stopping) return;
      try {
        await this.#registerWithBackoff(Infinity);
      } catch (e) {
        if (!this.#stopping) this.#log.error('rollcall registration given up', { error: e });
        return;
      }
    }
    this.#claim('boot');
  }

  async #fallback(error) {
    this.#counters.fallbacks++;
    this.#state = 'fallback';
    const mode = this.#o.fallback;
    const waited = this.#o.registerDeadlineMs;
    if (mode === 'local') {
      this.#log.error(
        `ROLLCALL UNREACHABLE for ${waited} ms: running the engine's own full recovery instead (fallback 'local'); this process will not take part in shared recovery until restarted`,
        { error, fallback: 'local' },
      );
      this.#emit('fallback', { mode, error });
      let outcome = { status: 'fallback', mode };
      try {
        await this.#o.localRecovery();
        this.#log.warn('local recovery finished', { fallback: 'local' });
      } catch (e) {
        this.#log.error('local recovery failed', { error: e, fallback: 'local' });
        outcome = { status: 'fallback', mode, error: e };
      }
      this.#settle(outcome);
    } else {
      this.#log.error(
        `ROLLCALL UNREACHABLE for ${waited} ms: NO CRASH RECOVERY RAN for this boot (fallback 'skip')` +
          (this.#o.rejoin ? '; still trying to register, and will take part in recovery once it does' : ''),
        { error, fallback: 'skip' },
      );
      this.#emit('fallback', { mode, error });
      this.#settle({ status: 'fallback', mode });
    }
  }

  // ---------------------------------------------------------------- registration and lease

  async #registerWithBackoff(deadline) {
    const { namespace, deploymentId, name, workerIds, registrationSecret } = this.#o;
    const body = { namespace, deploymentId, name };
    if (workerIds?.length) body.workerIds = workerIds;
    for (let attempt = 1; ; attempt++) {
      if (this.#stopping) throw new Error('stopped');
      const sentAt = now();
      // What this process executes already (a registration after a fence): published with the
      // registration itself, and again by the heartbeat that follows it.
      const inFlight = this.#inFlightSet();
      if (inFlight?.length) body.inFlight = inFlight;
      else delete body.inFlight;
      try {
        const answer = await this.#api.register(registrationSecret, body);
        // Publish what this process already executes before any claim can scan those runs.
        await this.#open(answer, sentAt);
        return;
      } catch (error) {
        if (!(error instanceof RollcallError) || !error.retryable) throw error;
        // Keep trying until the deadline itself (the last pause is cut short to meet it), so that
        // the fallback never starts before the configured deadline.
        const remaining = deadline - now();
        if (remaining <= 0) throw error;
        const delay = Math.min(backoff(attempt), remaining);
        this.#log.warn('rollcall not reachable; registering again after a pause', {
          error,
          attempt,
          retryInMs: Math.round(delay),
        });
        await this.#sleep(delay);
      }
    }
  }

  #open(answer, sentAt) {
    const previous = this.#session?.instanceId ?? null;
    const session = {
      instanceId: answer.instanceId,
      token: answer.token,
      leaseTtlMs: answer.leaseTtlMs,
      heartbeatIntervalMs: answer.heartbeatIntervalMs,
      // The lease was granted no earlier than the request left; counting from then errs safe.
      leaseDeadline: sentAt + answer.leaseTtlMs,
      closed: false,
      beating: false,
      fenceTimer: null,
      heartbeatTimer: null,
      recheckTimer: null,
      lock: null,
      beatAgain: false,
    };
    if (this.#stopping) {
      // Registered while stopping: leave at once rather than hold a lease nobody renews.
      session.closed = true;
      this.#api.leave(session.token, session.instanceId, this.#inFlightSet()).catch(() => {});
      return;
    }
    this.#session = session;
    this.#state = 'active';
    this.#counters.registrations++;
    if (answer.sessionLock && this.#connectSession) {
      // Held in the background; every change is reported at once, with an extra heartbeat.
      session.lock = new SessionLock({
        connect: this.#connectSession,
        keys: answer.sessionLock,
        log: this.#log,
        onChange: () => {
          const lock = session.lock;
          this.#emit('session-lock', { instanceId: session.instanceId, state: lock.state, reason: lock.reason, pid: lock.pid });
          this.#heartbeat(session);
        },
      });
      session.lock.start();
    }
    this.#armFence(session);
    session.heartbeatTimer = setInterval(() => this.#heartbeat(session), session.heartbeatIntervalMs);
    this.#log.info('registered with rollcall', {
      instanceId: session.instanceId,
      previousInstanceId: previous,
      deploymentId: this.#o.deploymentId,
      leaseTtlMs: session.leaseTtlMs,
      heartbeatIntervalMs: session.heartbeatIntervalMs,
    });
    this.#emit('registered', {
      instanceId: session.instanceId,
      previousInstanceId: previous,
      leaseTtlMs: session.leaseTtlMs,
      heartbeatIntervalMs: session.heartbeatIntervalMs,
    });
    // Tell the service at once what this process is already executing.
    return this.#inFlightSet()?.length ? this.#heartbeat(session) : undefined;
  }

  #armFence(session) {
    clearTimeout(session.fenceTimer);
    const left = session.leaseDeadline - now();
    session.fenceTimer = setTimeout(() => this.#fence(session, 'lease-expired'), Math.max(0, left));
  }

  async #heartbeat(session) {
    if (session.closed) return;
    if (session.beating) {
      session.beatAgain = true; // a session lock change arrived mid-beat: report it right after
      return;
    }
    session.beating = true;
    const sentAt = now();
    try {
      // Bounded so that one lost request costs at most one skipped beat, not the lease.
      const timeout = Math.min(this.#o.requestTimeoutMs, session.leaseTtlMs, 2 * session.heartbeatIntervalMs);
      if (session.lock) await withinMs(session.lock.verify(), Math.min(1_000, session.heartbeatIntervalMs / 3));
      const answer = await this.#api.heartbeat(
        session.token,
        session.instanceId,
        this.#inFlightSet(),
        timeout,
        session.lock?.report(),
      );
      if (session.closed) return; // fenced meanwhile: the app was told; stay fenced
      session.leaseDeadline = sentAt + session.leaseTtlMs;
      this.#armFence(session);
      this.#counters.leaseRenewals++;
      if (answer?.recoveryPending) this.#claim('recovery-pending');
      this.#recheck(session, answer?.recheckAfterMs);
    } catch (error) {
      if (session.closed) return;
      this.#counters.heartbeatFailures++;
      if (isGone(error)) {
        this.#fence(session, 'gone', error);
      } else {
        this.#log.warn('heartbeat failed', {
          error,
          instanceId: session.instanceId,
          leaseLeftMs: Math.round(session.leaseDeadline - now()),
        });
      }
    } finally {
      session.beating = false;
      if (session.beatAgain && !session.closed) {
        session.beatAgain = false;
        this.#heartbeat(session);
      }
    }
  }

  /**
   * The service says a peer holding runs is about to be declared dead: beat once more when its
   * takeover should be open, rather than up to a whole interval later, so its runs are claimed
   * within about a second.
   */
  #recheck(session, ms) {
    if (!Number.isFinite(ms) || ms < 0 || ms >= session.heartbeatIntervalMs) return;
    clearTimeout(session.recheckTimer);
    session.recheckTimer = setTimeout(() => this.#heartbeat(session), ms);
  }

  #inFlightSet() {
    let ids;
    try {
      ids = this.#inFlight.list();
    } catch (error) {
      this.#log.warn('the in-flight source threw; sending no in-flight set', { error });
      return undefined;
    }
    if (!Array.isArray(ids)) return undefined;
    if (ids.length > MAX_IN_FLIGHT) {
      this.#log.warn(`in-flight set of ${ids.length} entries cut to the service's ${MAX_IN_FLIGHT}`);
      return ids.slice(0, MAX_IN_FLIGHT);
    }
    return ids;
  }

  /**
   * Self-fencing: the lease may be gone (not renewed in time, or the service said 410), so this
   * instance stops claiming at once, says so, and registers again as a new instance.
   */
  #fence(session, reason, error) {
    if (session.closed) return;
    session.closed = true;
    clearTimeout(session.fenceTimer);
    clearTimeout(session.recheckTimer);
    clearInterval(session.heartbeatTimer);
    session.lock?.close();
    this.#counters.fencedEvents++;
    if (this.#stopping) return;
    this.#state = 'fenced';
    this.#log.warn('fenced: lease lost; claiming stopped, registering again as a new instance', {
      instanceId: session.instanceId,
      reason,
      error,
    });
    const event = { instanceId: session.instanceId, reason, error };
    this.#emit('fenced', event);
    if (typeof this.#o.onFenced === 'function') {
      try {
        this.#o.onFenced(event);
      } catch (e) {
        this.#log.error('onFenced threw', { error: e });
      }
    }
    this.#registerWithBackoff(Infinity).then(
      () => this.#claim('re-registered'),
      (e) => {
        if (!this.#stopping) this.#log.error('registering again failed; not retrying', { error: e });
      },
    );
  }

  // ---------------------------------------------------------------- claiming

  #claim(why) {
    if (this.#stopping) return;
    if (this.#claiming) {
      // One loop at a time. A loop of a fenced session ends soon: the new session claims then.
      if (this.#claimingSession !== this.#session) this.#claimAgain = true;
      return;
    }
    const session = this.#session;
    if (!session || session.closed) return;
    this.#claimingSession = session;
    this.#claiming = this.#claimUntilDone(session, why)
      .catch((error) => this.#log.error('claim loop failed', { error }))
      .finally(() => {
        this.#claiming = null;
        if (this.#claimAgain) {
          this.#claimAgain = false;
          this.#claim('again');
        }
      });
  }

  async #claimUntilDone(session, why) {
    this.#log.debug('claiming', { why, instanceId: session.instanceId });
    for (let failures = 0; !this.#stopping && !session.closed; ) {
      let answer;
      let asked;
      try {
        // Pushed, not polled: the service holds the claim until work appears or the pass is done.
        // Once this deploy's pass is done, the loop stays on as an idle claim, so a peer's leave or
        // death reaches this instance at once rather than at its next heartbeat.
        asked = now();
        answer = await this.#api.claim(session.token, this.#o.maxRuns, {
          waitMs: CLAIM_WAIT_MS,
          idle: this.#idle,
          signal: this.#wake.signal,
        });
        this.#counters.claims++;
        failures = 0;
      } catch (error) {
        if (this.#stopping) return;
        if (isGone(error)) {
          this.#fence(session, 'gone', error);
          return;
        }
        if (!(error instanceof RollcallError) || !error.retryable) {
          this.#log.error('claim refused; claiming stops until the service reports recovery pending', { error });
          return;
        }
        failures++;
        const delay = backoff(failures);
        this.#log.warn('claim failed; trying again after a pause', { error, retryInMs: Math.round(delay) });
        await this.#sleep(delay);
        continue;
      }
      if (answer.status === 'batch') {
        await this.#runBatch(session, answer.batch);
      } else if (answer.status === 'wait') {
        // The service held this claim for up to CLAIM_WAIT_MS: ask again at once. One that did
        // not hold it (answered at once) is asked again after its hint.
        this.#counters.waits++;
        this.#emit('wait', { retryAfterMs: answer.retryAfterMs });
        if (now() - asked < CLAIM_WAIT_MS / 2) await this.#sleep(answer.retryAfterMs);
      } else if (answer.status === 'done') {
        if (this.#idle) {
          // A service that does not hold idle claims answers at once: fall back to heartbeats.
          if (now() - asked < CLAIM_WAIT_MS / 2) return;
          continue;
        }
        this.#idle = true;
        this.#counters.epochsDone++;
        this.#log.info('recovery done', { epochId: answer.epochId, instanceId: session.instanceId });
        this.#emit('done', { epochId: answer.epochId, instanceId: session.instanceId });
        this.#settle({ status: 'done', epochId: answer.epochId });
      } else {
        this.#log.error('unknown claim answer; claiming stops', { status: answer.status });
        return;
      }
    }
  }

  async #runBatch(session, batch) {
    const ids = new Set(batch.runs.map((r) => r.runId));
    let failed = [];
    const started = now();
    try {
      const result = await this.#enqueue(batch.runs, { batch });
      if (result && Array.isArray(result.failedRunIds)) {
        failed = [...new Set(result.failedRunIds)].filter((id) => ids.has(id));
      }
    } catch (error) {
      this.#log.error('enqueue failed for the whole batch; reporting every run failed', {
        error,
        batchId: batch.id,
      });
      failed = [...ids];
    }
    this.#counters.batches++;
    this.#counters.runsEnqueued += ids.size - failed.length;
    this.#counters.runFailures += failed.length;
    const summary = {
      batchId: batch.id,
      epochId: batch.epochId,
      epochKind: batch.epochKind,
      fence: batch.fence,
      runs: ids.size,
      enqueued: ids.size - failed.length,
      failed: failed.length,
      enqueueMs: Math.round(now() - started),
      instanceId: session.instanceId,
    };
    this.#log.info('batch enqueued', summary);
    this.#emit('batch', summary);

    // Complete even when fenced meanwhile: the service decides whether this fence still counts.
    for (let attempt = 1; ; attempt++) {
      try {
        const answer = await this.#api.complete(session.token, batch.id, batch.fence, failed);
        this.#emit('completed', { ...summary, answer });
        return;
      } catch (error) {
        const refused = !(error instanceof RollcallError) || !error.retryable || attempt >= this.#o.completeAttempts;
        if (!refused) {
          await sleepPlain(backoff(attempt));
          continue;
        }
        this.#counters.completesRefused++;
        const level = error.status === 409 || isGone(error) ? 'warn' : 'error';
        this.#log[level](
          error.status === 409
            ? 'complete refused: the batch was leased again meanwhile (its runs may be enqueued twice)'
            : 'complete refused',
          { error, batchId: batch.id, fence: batch.fence },
        );
        this.#emit('complete-refused', { ...summary, status: error.status, type: error.type, error });
        if (isGone(error)) this.#fence(session, 'gone', error);
        return;
      }
    }
  }

  // ---------------------------------------------------------------- stopping

  async #doStop({ exiting }) {
    this.#stopping = true;
    this.#state = 'stopping';
    this.#wake.abort();
    for (const unhook of this.#unhook.splice(0)) unhook();
    if (this.#claiming) {
      let timer;
      await Promise.race([
        this.#claiming,
        new Promise((resolve) => {
          timer = setTimeout(resolve, this.#o.stopTimeoutMs);
        }),
      ]);
      clearTimeout(timer);
    }
    const session = this.#session;
    if (session && !session.closed) {
      session.closed = true;
      clearTimeout(session.fenceTimer);
      clearTimeout(session.recheckTimer);
      clearInterval(session.heartbeatTimer);
      const inFlight = this.#inFlightSet();
      try {
        await this.#api.leave(session.token, session.instanceId, inFlight, { exiting });
        this.#log.info('left rollcall', {
          instanceId: session.instanceId,
          inFlight: inFlight?.length ?? 0,
          exiting,
        });
      } catch (error) {
        this.#log.warn('leaving failed; the lease will simply expire', { error, instanceId: session.instanceId });
      }
      // Released after the leave, so the service never takes a departure for a crash. An exiting
      // process keeps it: its executions run until it exits, and the lock ends with the process,
      // which is the exact moment its takeover may start.
      if (!exiting) await session.lock?.close();
    }
    this.#state = 'stopped';
    this.#settle({ status: 'stopped' });
    this.#emit('stopped', { stats: this.stats });
  }

  #hookSignal(name) {
    const handler = async () => {
      process.removeListener(name, handler);
      await this.stop();
      // Nobody else listens: do what the signal would have done without us.
      if (process.listenerCount(name) === 0) process.kill(process.pid, name);
    };
    process.on(name, handler);
    this.#unhook.push(() => process.removeListener(name, handler));
  }

  // ---------------------------------------------------------------- plumbing

  #settle(outcome) {
    if (this.#recoveredSettled) return;
    this.#recoveredSettled = true;
    this.#settleRecovered(outcome);
  }

  #emit(event, payload) {
    for (const fn of [...(this.#listeners.get(event) ?? [])]) {
      try {
        fn(payload);
      } catch (error) {
        this.#log.error(`a '${event}' listener threw`, { error });
      }
    }
  }

  /** Sleeps, or returns early when stop() is called. */
  #sleep(ms) {
    const signal = this.#wake.signal;
    if (signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener('abort', done, { once: true });
    });
  }
}

function isGone(error) {
  // 410: the instance left or missed its lease. 401: the service no longer knows the token.
  return error instanceof RollcallError && (error.status === 410 || error.status === 401);
}

/** Exponential backoff with jitter: between half and all of min(max, base * 2^(attempt-1)). */
export function backoff(attempt, base = BACKOFF_BASE_MS, max = BACKOFF_MAX_MS) {
  const ceiling = Math.min(max, base * 2 ** Math.min(attempt - 1, 20));
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

/** Waits for `promise`, but no longer than `ms`. */
function withinMs(promise, ms) {
  let timer;
  return Promise.race([promise, new Promise((resolve) => (timer = setTimeout(resolve, ms)))]).finally(() =>
    clearTimeout(timer),
  );
}

function sleepPlain(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
