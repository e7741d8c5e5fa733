// This process's membership in Rollcall: registration, then one session per registration (its
// lease, heartbeats, lapse timer and session lock), the lapse of a lease nobody answered, fencing
// when the service says the instance is gone, registering again as a new instance after a fence,
// and the leave.
import { performance } from 'node:perf_hooks';
import { RollcallError } from './errors.js';
import { mayTakeJobs, serviceAway } from './job-gate.js';
import { retryDelay } from './retry.js';
import { SessionLock } from './session-lock.js';

/** The service accepts at most this many in-flight entries in one heartbeat. */
export const MAX_IN_FLIGHT = 10_000;

const now = () => performance.now();
// How long a leave waits for a heartbeat already on the wire to be answered.
const LEAVE_AFTER_BEAT_MS = 1_000;

/**
 * Registers, keeps one live session at a time, marks it lapsed while its lease may be gone, fences
 * it when the service says it is gone and registers again. `ctx` is what the client shares with its parts: options `o`, `api`, `log`, `life` (the
 * Lifecycle), `counters`, `emit`, `sleep` (cut short by stop()), `inFlight` (the in-flight source),
 * `connectSession`. `onRejoined()` is called once a registration after a fence is open,
 * `onRecoveryPending()` when a heartbeat's answer says there is recovery to claim.
 */
export class Membership {
  #ctx;
  #hooks;
  #session = null;
  // What the database last showed while the lease has lapsed: the service away (job-gate.js).
  #away = false;

  constructor(ctx, { onRejoined, onRecoveryPending }) {
    this.#ctx = ctx;
    this.#hooks = { onRejoined, onRecoveryPending };
  }

  /** The live session, or null (not registered yet, fenced, or left). */
  get current() {
    return this.#session?.live ? this.#session : null;
  }

  /**
   * Registers, retrying what is worth retrying until `deadline` (monotonic ms; Infinity: none),
   * and opens the session. Rejects with the last error once the deadline passed, with a refusal
   * at once, or with `Error('stopped')` once stop() was called.
   */
  async join(deadline) {
    const { o, api, log, life } = this.#ctx;
    const { namespace, deploymentId, name, registrationSecret } = o;
    const body = { namespace, deploymentId, name };
    for (let attempt = 1; ; attempt++) {
      if (life.stopping) throw new Error('stopped');
      const sentAt = now();
      const workerIds = this.workerIds();
      if (workerIds.length) body.workerIds = workerIds;
      else delete body.workerIds;
      // What this process executes already (a registration after a fence): published with the
      // registration itself, and again by the heartbeat that follows it.
      const inFlight = this.inFlightSet();
      if (inFlight?.length) body.inFlight = inFlight;
      else delete body.inFlight;
      try {
        const answer = await api.register(registrationSecret, body);
        // Publish what this process already executes before any claim can scan those runs.
        await this.#open(answer, sentAt, workerIds);
        return;
      } catch (error) {
        if (!(error instanceof RollcallError) || !error.retryable) throw error;
        // Keep trying until the deadline itself (the last pause is cut short to meet it), so that
        // the fallback never starts before the configured deadline.
        const remaining = deadline - now();
        if (remaining <= 0) throw error;
        const delay = Math.min(retryDelay(error, attempt), remaining);
        log.warn('rollcall not reachable; registering again after a pause', {
          error,
          attempt,
          retryInMs: Math.round(delay),
        });
        await this.#ctx.sleep(delay);
      }
    }
  }

  /**
   * Leaves with the last in-flight set. Resolves with the error when the leave failed (also
   * reported as `leave-failed`), else null; never rejects. An exiting process keeps its session
   * lock: its executions run until it exits, and the lock ends with the process, which is the
   * exact moment its takeover may start.
   */
  async leave({ exiting = false } = {}) {
    // Stopping: new jobs are the application's business again (it closes its queue first).
    this.#gateJobs('stopping');
    const session = this.current;
    if (!session) return null;
    const error = await this.#leave(session, { exiting });
    // Released after the leave, so the service never takes a departure for a crash.
    if (!exiting) await session.lock?.close();
    return error;
  }

  /**
   * The queue worker ids of this process: those given as `workerIds`, then those `queueWorkers`
   * found so far (see queue-workers.js).
   */
  workerIds() {
    const { o } = this.#ctx;
    const found = o.queueWorkers?.list() ?? [];
    return [...new Set([...(o.workerIds ?? []), ...found])];
  }

  /** The in-flight set to publish, at most MAX_IN_FLIGHT entries; undefined when the source failed. */
  inFlightSet() {
    const { inFlight, log } = this.#ctx;
    let ids;
    try {
      ids = inFlight.list();
    } catch (error) {
      log.warn('the in-flight source threw; sending no in-flight set', { error });
      return undefined;
    }
    if (!Array.isArray(ids)) return undefined;
    if (ids.length > MAX_IN_FLIGHT) {
      log.warn(`in-flight set of ${ids.length} entries cut to the service's ${MAX_IN_FLIGHT}`);
      return ids.slice(0, MAX_IN_FLIGHT);
    }
    return ids;
  }

  #open(answer, sentAt, workerIds) {
    const { o, log, life, counters, emit } = this.#ctx;
    const previous = this.#session?.instanceId ?? null;
    const session = new Session(this.#ctx, this, answer, sentAt, workerIds);
    if (!life.to('active')) {
      // Registered while stopping: leave at once rather than hold a lease nobody renews.
      this.#leave(session, { exiting: false });
      return;
    }
    this.#session = session;
    counters.registrations++;
    this.#away = false;
    this.#gateJobs('registered');
    session.start();
    log.info('registered with rollcall', {
      instanceId: session.instanceId,
      previousInstanceId: previous,
      deploymentId: o.deploymentId,
      leaseTtlMs: session.leaseTtlMs,
      heartbeatIntervalMs: session.heartbeatIntervalMs,
    });
    emit('registered', {
      instanceId: session.instanceId,
      previousInstanceId: previous,
      leaseTtlMs: session.leaseTtlMs,
      heartbeatIntervalMs: session.heartbeatIntervalMs,
    });
    // Tell the service at once what this process is already executing.
    return this.inFlightSet()?.length ? session.heartbeat() : undefined;
  }

  async #leave(session, { exiting }) {
    const { api, log, counters, emit } = this.#ctx;
    session.close();
    // A beat already on the wire is answered first, so the service reads the leave last.
    await session.settled(LEAVE_AFTER_BEAT_MS);
    const inFlight = this.inFlightSet();
    try {
      await api.leave(session.token, session.instanceId, inFlight, { exiting });
      log.info('left rollcall', { instanceId: session.instanceId, inFlight: inFlight?.length ?? 0, exiting });
      return null;
    } catch (error) {
      // The departure was not recorded: the service goes by the lease (or had already declared
      // this instance gone: `error.gone`). Its takeover comes when the lease runs out, not now.
      counters.leaveFailures++;
      log.warn('leaving failed; the lease will simply expire', { error, instanceId: session.instanceId });
      emit('leave-failed', { instanceId: session.instanceId, error });
      return error;
    }
  }

  /** Called by a session whose heartbeat answer says there is recovery to claim. */
  recoveryPending() {
    this.#hooks.onRecoveryPending();
  }

  /** Called by a session whose lease may be gone, or is renewed again (`lapsed` false). */
  lapsed(session, lapsed) {
    const { log, counters, emit } = this.#ctx;
    if (lapsed) {
      counters.leaseLapses++;
      log.warn(
        'lease may be gone: rollcall answered no heartbeat for a lease TTL; keeping this instance and its session lock, heartbeating on',
        { instanceId: session.instanceId },
      );
    } else {
      log.info('lease renewed after a lapse', { instanceId: session.instanceId });
    }
    // New jobs are held (or let go) first: a listener of the event sees the gate already moved.
    this.#away = false;
    this.#gateJobs(lapsed ? 'lease-lapsed' : 'lease-renewed');
    emit(lapsed ? 'lease-lapsed' : 'lease-renewed', { instanceId: session.instanceId });
    if (lapsed) this.#watchAway(session);
  }

  /**
   * Holds or lets go the taking of new jobs by this process's queue workers (`queueWorkers`, whose
   * `noticingPool` carries it out) as mayTakeJobs decides from where the membership stands now.
   */
  #gateJobs(reason) {
    const { o, log, life, counters, emit } = this.#ctx;
    const workers = o.queueWorkers;
    if (typeof workers?.holdJobs !== 'function') return;
    const held = !mayTakeJobs({ state: life.state, lapsed: this.current?.lapsed ?? false, serviceAway: this.#away });
    if (!workers.holdJobs(held)) return;
    const instanceId = this.current?.instanceId ?? this.#session?.instanceId ?? null;
    if (held) {
      counters.jobHolds++;
      log.warn('taking no new queue job: a peer may be taking over what this instance runs; running jobs go on', {
        instanceId,
        reason,
      });
    } else {
      log.info('taking queue jobs again', { instanceId, reason });
    }
    emit(held ? 'jobs-held' : 'jobs-resumed', { instanceId, reason });
  }

  /**
   * While the lease has lapsed, reads (about every second) whether the database shows the service
   * away, and lets new jobs go on while it does. Cannot read it (no `pool`, no grant, the database
   * away too): jobs stay held, since nothing shows that no peer takes over.
   */
  async #watchAway(session) {
    const { o, log, life, sleep } = this.#ctx;
    if (typeof o.queueWorkers?.holdJobs !== 'function') return;
    let warned = false;
    while (session.lapsed && !life.stopping) {
      let away = false;
      try {
        away = o.pool ? await serviceAway(o.pool, session.instanceId, session.leaseTtlMs) : false;
        warned = false;
      } catch (error) {
        if (!warned) log.warn('cannot read whether rollcall is away; taking no new queue job while the lease has lapsed', { error });
        warned = true;
      }
      if (!session.lapsed) return;
      this.#away = away;
      this.#gateJobs(away ? 'rollcall-away' : 'lease-lapsed');
      await sleep(Math.min(1_000, session.heartbeatIntervalMs));
    }
  }

  /** Called by a session that fenced itself: says so, then registers again as a new instance. */
  fenced(session, reason, error) {
    const { o, log, life, counters, emit } = this.#ctx;
    counters.fencedEvents++;
    if (!life.to('fenced')) return; // stopping: the leave is all that is left
    this.#gateJobs('fenced');
    log.warn('fenced: lease lost; claiming stopped, registering again as a new instance', {
      instanceId: session.instanceId,
      reason,
      error,
    });
    const event = { instanceId: session.instanceId, reason, error };
    emit('fenced', event);
    if (typeof o.onFenced === 'function') {
      try {
        o.onFenced(event);
      } catch (e) {
        log.error('onFenced threw', { error: e });
      }
    }
    this.join(Infinity).then(
      () => this.#hooks.onRejoined(),
      (e) => {
        if (!life.stopping) log.error('registering again failed; not retrying', { error: e });
      },
    );
  }
}

/**
 * One registration: live from the service's answer until it is fenced or leaves, never again
 * after. The lease is counted on the monotonic clock from when the last renewal was sent.
 */
class Session {
  instanceId;
  token;
  leaseTtlMs;
  heartbeatIntervalMs;
  /** The session lock, when the service named one and a database session is known. */
  lock = null;
  #ctx;
  #membership;
  #keys;
  #leaseDeadline;
  #live = true;
  // 'idle', 'sending' (a beat is on the wire), or 'again' (another beat was asked for meanwhile).
  #beat = 'idle';
  // Settles when the beat under way has its answer (or gave up): a leave goes after it.
  #beaten = null;
  // A 429 or 503 asked to wait: no beat before this (monotonic ms).
  #notBefore = 0;
  #lapseTimer = null;
  // The lease ran out on the local clock with no renewal: see #lapse.
  #lapsed = false;
  #heartbeatTimer = null;
  #soonTimer = null;
  // A prompt report of new work is due (see #reportPromptly); and when the last beat was sent.
  #promptTimer = null;
  #lastSentAt = 0;
  #stopWatching = [];
  // The queue worker ids the service has (registered, or named by an answered heartbeat).
  #named;

  constructor(ctx, membership, answer, sentAt, workerIds = []) {
    this.#ctx = ctx;
    this.#membership = membership;
    this.instanceId = answer.instanceId;
    this.token = answer.token;
    this.leaseTtlMs = answer.leaseTtlMs;
    this.heartbeatIntervalMs = answer.heartbeatIntervalMs;
    this.#keys = answer.sessionLock;
    this.#named = new Set(workerIds);
    // The lease was granted no earlier than the request left; counting from then errs safe.
    this.#leaseDeadline = sentAt + answer.leaseTtlMs;
  }

  get live() {
    return this.#live;
  }

  /** True while the lease may be gone: it ran out on the local clock and no renewal came since. */
  get lapsed() {
    return this.#live && this.#lapsed;
  }

  /** Takes the session lock (in the background), arms the fence and starts the heartbeats. */
  start() {
    const { connectSession, log, emit } = this.#ctx;
    if (this.#keys && connectSession) {
      // Held in the background; every change is reported at once, with an extra heartbeat.
      this.lock = new SessionLock({
        connect: connectSession,
        keys: this.#keys,
        log,
        onChange: () => {
          const lock = this.lock;
          emit('session-lock', { instanceId: this.instanceId, state: lock.state, reason: lock.reason, pid: lock.pid });
          this.heartbeat();
        },
      });
      this.lock.start();
    }
    this.#armLapse();
    this.#heartbeatTimer = setInterval(() => this.heartbeat(), this.heartbeatIntervalMs);
    const { o, inFlight } = this.#ctx;
    if (o.reportPromptlyMs > 0) {
      const tracker = inFlight?.tracker;
      if (typeof tracker?.onBegin === 'function') {
        this.#stopWatching.push(tracker.onBegin(() => this.#reportPromptly()));
      }
      // A queue worker found after registration is named as promptly as new work: until the
      // service knows it, a lock it takes waits for the orphan release if this process dies.
      if (typeof o.queueWorkers?.onNew === 'function') {
        this.#stopWatching.push(o.queueWorkers.onNew(() => this.#reportPromptly()));
      }
      if (this.#membership.workerIds().some((id) => !this.#named.has(id))) this.#reportPromptly();
    }
  }

  /**
   * New work began (or a new queue worker was found): report it within reportPromptlyMs rather
   * than at the next regular beat (up to a whole interval later), at most one such beat a second. Until an execution's message is
   * reported, Rollcall cannot tell its queue lock from an orphan's: a process killed before its
   * next beat would leave those locks to the orphan release (older than the activity fence)
   * instead of its takeover.
   */
  #reportPromptly() {
    if (!this.#live || this.#promptTimer) return;
    const delay = Math.max(this.#ctx.o.reportPromptlyMs, this.#lastSentAt + 1_000 - now());
    this.#promptTimer = setTimeout(() => {
      this.#promptTimer = null;
      this.heartbeat();
    }, delay);
  }

  /**
   * Settles once the beat under way, if any, has its answer, or after `ms`. A leave waits for it:
   * a beat the service read after an exiting leave would give back the lease the leave shortened.
   */
  settled(ms) {
    return this.#beaten ? withinMs(this.#beaten, ms) : Promise.resolve();
  }

  /** Ends this session's timers for good (fenced or leaving). The session lock is not touched. */
  close() {
    this.#live = false;
    clearTimeout(this.#lapseTimer);
    clearTimeout(this.#soonTimer);
    clearTimeout(this.#promptTimer);
    clearInterval(this.#heartbeatTimer);
    for (const stop of this.#stopWatching.splice(0)) stop?.();
  }

  /**
   * The one place where the service's word that this instance is no longer live is acted on,
   * whichever call heard it: the session fences itself. True when `error` said so.
   */
  fencedBy(error) {
    if (!(error instanceof RollcallError) || !error.gone) return false;
    this.#fence('gone', error);
    return true;
  }

  async heartbeat() {
    if (!this.#live) return;
    if (this.#beat !== 'idle') {
      this.#beat = 'again'; // a session lock change arrived mid-beat: report it right after
      return;
    }
    const wait = this.#notBefore - now();
    if (wait > 0) {
      this.#beatIn(wait); // the service asked to wait: this beat goes then
      return;
    }
    this.#beat = 'sending';
    let beaten;
    this.#beaten = new Promise((resolve) => (beaten = resolve));
    const { o, api, log, counters } = this.#ctx;
    const sentAt = now();
    this.#lastSentAt = sentAt;
    try {
      // Bounded so that one lost request costs at most one skipped beat, not the lease.
      const timeout = Math.min(o.requestTimeoutMs, this.leaseTtlMs, 2 * this.heartbeatIntervalMs);
      if (this.lock) await withinMs(this.lock.verify(), Math.min(1_000, this.heartbeatIntervalMs / 3));
      // Closed while the lock was verified (the process is leaving): nothing more goes out.
      if (!this.#live) return;
      const newWorkers = this.#membership.workerIds().filter((id) => !this.#named.has(id));
      const answer = await api.heartbeat(this.token, this.instanceId, this.#membership.inFlightSet(), timeout, this.lock?.report(), newWorkers);
      for (const id of newWorkers) this.#named.add(id);
      if (!this.#live) return; // fenced meanwhile: the app was told; stay fenced
      this.#leaseDeadline = sentAt + this.leaseTtlMs;
      this.#armLapse();
      counters.leaseRenewals++;
      if (this.#lapsed) {
        this.#lapsed = false;
        this.#membership.lapsed(this, false);
      }
      if (answer?.recoveryPending) this.#membership.recoveryPending();
      this.#recheck(answer?.recheckAfterMs);
    } catch (error) {
      if (!this.#live) return;
      counters.heartbeatFailures++;
      if (this.fencedBy(error)) return;
      // Asked to wait (429, 503 with a hint): beat again then, not a whole interval later, and
      // not sooner either.
      const retryInMs = error?.retryAfterMs != null ? retryDelay(error, 1) : null;
      log.warn('heartbeat failed', {
        error,
        instanceId: this.instanceId,
        leaseLeftMs: Math.round(this.#leaseDeadline - now()),
        retryInMs,
      });
      if (retryInMs != null) {
        this.#notBefore = now() + retryInMs;
        this.#beatIn(retryInMs);
      }
    } finally {
      const again = this.#beat === 'again';
      this.#beat = 'idle';
      this.#beaten = null;
      beaten();
      if (again && this.#live) this.heartbeat();
    }
  }

  /**
   * The service says a peer holding runs is about to be declared dead: beat once more when its
   * takeover should be open, rather than up to a whole interval later, so its runs are claimed
   * within about a second.
   */
  #recheck(ms) {
    if (!Number.isFinite(ms) || ms < 0 || ms >= this.heartbeatIntervalMs) return;
    this.#beatIn(ms);
  }

  #beatIn(ms) {
    clearTimeout(this.#soonTimer);
    this.#soonTimer = setTimeout(() => this.heartbeat(), ms);
  }

  #armLapse() {
    clearTimeout(this.#lapseTimer);
    const left = this.#leaseDeadline - now();
    this.#lapseTimer = setTimeout(() => this.#lapse(), Math.max(0, left));
  }

  /**
   * The lease ran out on the local clock without a renewal: the service may have declared this
   * instance dead, or it may be away itself (its own outage, or the database's), in which case the
   * first service replica back renews the leases that lapsed unanswered. Only the service can
   * tell, so the session stays: the same instance, its session lock still held (the proof of life
   * the service trusts over a lease), heartbeats going on. A renewal ends the lapse; a heartbeat,
   * claim or complete answered gone fences it (#fence). Ending the session here instead released
   * the lock of a live process during every outage of Rollcall longer than a lease, and the
   * service, back, declared the instance dead on its lost session.
   */
  #lapse() {
    if (!this.#live || this.#lapsed) return;
    this.#lapsed = true;
    this.#membership.lapsed(this, true);
  }

  /**
   * Self-fencing: the service said this instance is gone, so this session ends at once; claims of
   * it stop, and the membership registers again.
   */
  #fence(reason, error) {
    if (!this.#live) return;
    this.close();
    this.lock?.close();
    this.#membership.fenced(this, reason, error);
  }
}

/** Waits for `promise`, but no longer than `ms`. */
function withinMs(promise, ms) {
  let timer;
  return Promise.race([promise, new Promise((resolve) => (timer = setTimeout(resolve, ms)))]).finally(() =>
    clearTimeout(timer),
  );
}
