import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import { ClaimLoop } from './claim-loop.js';
import { RollcallError } from './errors.js';
import { graphileEnqueuer } from './graphile.js';
import { RollcallApi } from './http.js';
import { Lifecycle } from './lifecycle.js';
import { toLogger } from './log.js';
import { sleep } from './retry.js';
import { Membership } from './session.js';
import { sessionConnector } from './session-lock.js';
import { toInFlightSource } from './tracker.js';

const DEFAULTS = {
  registerDeadlineMs: 30_000,
  requestTimeoutMs: 10_000,
  stopTimeoutMs: 10_000,
  fallback: 'skip',
  rejoin: true,
  jobPrefix: 'workflow_',
  completeAttempts: 5,
  reportPromptlyMs: 250,
};

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

/**
 * The handle `startRecovery` returns: checks the options, owns the life cycle (lifecycle.js), boot
 * and fallback, stop and the events; registration, lease and heartbeats are the membership's
 * (session.js), claims the claim loop's (claim-loop.js).
 */
export class RecoveryClient {
  #o;
  #log;
  #inFlight;
  #life = new Lifecycle();
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
    leaseLapses: 0,
    jobHolds: 0,
    completesRefused: 0,
    fallbacks: 0,
    leaveFailures: 0,
  };
  // Aborted by stop(): cuts pauses and held claims short.
  #wake = new AbortController();
  #membership;
  #claims;
  #stopPromise = null;
  #settleRecovered;
  #unhook = [];

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
    if (o.queueWorkers != null && typeof o.queueWorkers.list !== 'function') {
      throw new TypeError('startRecovery: queueWorkers is a QueueWorkers (list(), onNew())');
    }
    this.#o = o;
    this.#o.name ??= `${hostname()}-${process.pid}`;
    this.#log = toLogger(o.logger);
    this.#inFlight = toInFlightSource(o.inFlight);
    this.recovered = new Promise((resolve) => {
      // Only the first outcome counts: a promise resolves once.
      this.#settleRecovered = resolve;
    });
    const ctx = {
      o,
      api: new RollcallApi({ url: o.url, fetch: o.fetch, requestTimeoutMs: o.requestTimeoutMs }),
      log: this.#log,
      life: this.#life,
      counters: this.#counters,
      emit: (event, payload) => this.#emit(event, payload),
      signal: this.#wake.signal,
      sleep: (ms) => sleep(ms, this.#wake.signal),
      settle: (outcome) => this.#settleRecovered(outcome),
      inFlight: this.#inFlight,
      connectSession: sessionConnector(o),
      enqueue:
        typeof o.enqueue === 'function'
          ? o.enqueue
          : graphileEnqueuer({ pool: o.pool, jobPrefix: o.jobPrefix, schema: o.graphileSchema }),
    };
    this.#membership = new Membership(ctx, {
      onRejoined: () => this.#claims.claim('re-registered'),
      onRecoveryPending: () => this.#claims.claim('recovery-pending'),
    });
    this.#claims = new ClaimLoop(ctx, this.#membership);
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

  /** The life-cycle state: see lifecycle.js for each state and the moves between them. */
  get state() {
    return this.#life.state;
  }

  /**
   * The session lock of the current registration: `held`, `lost` (reconnecting), `unavailable`
   * (the service keeps the lease for this instance), or `off` (no connection string, or disabled).
   */
  get sessionLock() {
    return this.#membership.current?.lock?.state ?? 'off';
  }

  /**
   * True while the lease may be gone: no heartbeat was answered for a lease TTL (the service is
   * away, or this process is cut off from it); false again once a heartbeat is answered.
   */
  get leaseLapsed() {
    return this.#membership.current?.lapsed ?? false;
  }

  /** The current instance id, or null while not registered. */
  get instanceId() {
    return this.#membership.current?.instanceId ?? null;
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
    if (!this.#life.to('registering')) return;
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
   * Stops claiming, lets the batch in hand finish (at most `stopTimeoutMs`; pauses between its
   * complete's tries are cut short), stops heartbeats and leaves with the last in-flight set. Safe
   * to call more than once.
   */
  stop({ exiting = false } = {}) {
    this.#stopPromise ??= this.#doStop({ exiting });
    return this.#stopPromise;
  }

  // ---------------------------------------------------------------- boot and fallback

  async #boot() {
    const deadline = now() + this.#o.registerDeadlineMs;
    try {
      await this.#membership.join(deadline);
    } catch (error) {
      if (this.#life.stopping) return;
      if (error instanceof RollcallError && !error.retryable) {
        if (!this.#life.to('failed')) return;
        this.#log.error('rollcall refused the registration; no recovery runs for this boot', { error });
        this.#emit('failed', { error });
        this.#settleRecovered({ status: 'failed', error });
        return;
      }
      if (!this.#life.to('fallback')) return;
      await this.#fallback(error);
      if (this.#o.fallback === 'local' || !this.#o.rejoin || this.#life.stopping) return;
      try {
        await this.#membership.join(Infinity);
      } catch (e) {
        if (!this.#life.stopping) this.#log.error('rollcall registration given up', { error: e });
        return;
      }
    }
    this.#claims.claim('boot');
  }

  async #fallback(error) {
    this.#counters.fallbacks++;
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
      this.#settleRecovered(outcome);
    } else {
      this.#log.error(
        `ROLLCALL UNREACHABLE for ${waited} ms: NO CRASH RECOVERY RAN for this boot (fallback 'skip')` +
          (this.#o.rejoin ? '; still trying to register, and will take part in recovery once it does' : ''),
        { error, fallback: 'skip' },
      );
      this.#emit('fallback', { mode, error });
      this.#settleRecovered({ status: 'fallback', mode });
    }
  }

  // ---------------------------------------------------------------- stopping

  async #doStop({ exiting }) {
    this.#life.to('stopping');
    this.#wake.abort();
    for (const unhook of this.#unhook.splice(0)) unhook();
    await this.#claims.ended(this.#o.stopTimeoutMs);
    await this.#membership.leave({ exiting });
    this.#life.to('stopped');
    this.#settleRecovered({ status: 'stopped' });
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

  #emit(event, payload) {
    for (const fn of [...(this.#listeners.get(event) ?? [])]) {
      try {
        fn(payload);
      } catch (error) {
        this.#log.error(`a '${event}' listener threw`, { error });
      }
    }
  }
}
