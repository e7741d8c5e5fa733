// Claiming: held claims until the deploy's pass is done, then one idle claim; each batch enqueued
// and completed (with retries that stop() cuts short) while the next claim is already on its way.
import { performance } from 'node:perf_hooks';
import { RollcallError } from './errors.js';
import { retryDelay } from './retry.js';

// How long the service may hold one claim that has nothing to hand out yet (its
// rollcall.claim.max-wait is 30 s by default); it answers at once when work appears.
const CLAIM_WAIT_MS = 20_000;

const now = () => performance.now();

/**
 * One claim loop at a time, always for the membership's current session. `ctx` as for Membership,
 * plus `enqueue`, `signal` (aborted by stop(): cuts a held claim short) and `settle` (resolves
 * `recovered`).
 */
export class ClaimLoop {
  #ctx;
  #membership;
  // The loop running now: { session, done (a promise), again (claim once more when it ends) }.
  #loop = null;
  // This deploy's pass is done: claims wait for takeovers and sweeps.
  #idle = false;
  // The last batch's complete, on its way while the next batch is enqueued (null when none).
  #completing = null;

  constructor(ctx, membership) {
    this.#ctx = ctx;
    this.#membership = membership;
  }

  /** Starts claiming for the current session, unless a loop runs already or stop() was called. */
  claim(why) {
    if (this.#ctx.life.stopping) return;
    if (this.#loop) {
      // One loop at a time. A loop of a fenced session ends soon: the new session claims then.
      if (this.#loop.session !== this.#membership.current) this.#loop.again = true;
      return;
    }
    const session = this.#membership.current;
    if (!session) return;
    const loop = { session, again: false, done: null };
    this.#loop = loop;
    loop.done = this.#untilDone(session, why)
      .catch((error) => this.#ctx.log.error('claim loop failed', { error }))
      .finally(() => {
        this.#loop = null;
        if (loop.again) this.claim('again');
      });
  }

  /** Resolves when the running loop (if any) ended, or after `ms`, whichever comes first. */
  async ended(ms) {
    if (!this.#loop) return;
    let timer;
    await Promise.race([this.#loop.done, new Promise((resolve) => (timer = setTimeout(resolve, ms)))]);
    clearTimeout(timer);
  }

  async #untilDone(session, why) {
    try {
      await this.#claimUntilDone(session, why);
    } finally {
      // The last batch's complete ends before the loop does.
      await this.#completing;
    }
  }

  async #claimUntilDone(session, why) {
    const { o, api, log, life, counters, emit, settle } = this.#ctx;
    log.debug('claiming', { why, instanceId: session.instanceId });
    // A claim sent, without being held, while the batch before it was enqueued and completed: the
    // service classifies the next page while this process enqueues the last one. At most one such
    // claim at a time, so an instance holds at most two batches. If the loop ends first (stop, a
    // fenced session), a batch it got is released by the leave, or by the takeover.
    let ahead = null;
    for (let failures = 0; !life.stopping && session.live; ) {
      let answer;
      let asked;
      const early = ahead !== null;
      try {
        // Pushed, not polled: the service holds the claim until work appears or the pass is done.
        // Once this deploy's pass is done, the loop stays on as an idle claim, so a peer's leave or
        // death reaches this instance at once rather than at its next heartbeat.
        asked = now();
        if (early) {
          const sent = ahead;
          ahead = null;
          answer = await sent;
        } else {
          answer = await api.claim(session.token, o.maxRuns, {
            waitMs: CLAIM_WAIT_MS,
            idle: this.#idle,
            signal: this.#ctx.signal,
          });
        }
        counters.claims++;
        failures = 0;
      } catch (error) {
        if (life.stopping) return;
        if (session.fencedBy(error)) return;
        // The claim sent ahead failed: ask again the usual way.
        if (early) continue;
        if (!(error instanceof RollcallError) || !error.retryable) {
          log.error('claim refused; claiming stops until the service reports recovery pending', { error });
          return;
        }
        failures++;
        const delay = retryDelay(error, failures);
        log.warn('claim failed; trying again after a pause', { error, retryInMs: Math.round(delay) });
        await this.#ctx.sleep(delay);
        continue;
      }
      if (answer.status === 'batch') {
        ahead = api.claim(session.token, o.maxRuns, { waitMs: 0, idle: false, signal: this.#ctx.signal });
        // Awaited on the next turn; until then a failure is not an unhandled rejection.
        ahead.catch(() => {});
        await this.#runBatch(session, answer.batch);
      } else if (early && !(answer.status === 'done' && !this.#idle)) {
        // The claim sent ahead was not held: nothing more yet, ask again the way that waits.
        continue;
      } else if (answer.status === 'wait') {
        // The service held this claim for up to CLAIM_WAIT_MS: ask again at once. One that did
        // not hold it (answered at once) is asked again after its hint.
        counters.waits++;
        emit('wait', { retryAfterMs: answer.retryAfterMs });
        if (now() - asked < CLAIM_WAIT_MS / 2) await this.#ctx.sleep(answer.retryAfterMs);
      } else if (answer.status === 'done') {
        if (this.#idle) {
          // A service that does not hold idle claims answers at once: fall back to heartbeats.
          if (now() - asked < CLAIM_WAIT_MS / 2) return;
          continue;
        }
        // Done once this instance's own last complete has ended too.
        await this.#completing;
        this.#idle = true;
        counters.epochsDone++;
        log.info('recovery done', { epochId: answer.epochId, instanceId: session.instanceId });
        emit('done', { epochId: answer.epochId, instanceId: session.instanceId });
        settle({ status: 'done', epochId: answer.epochId });
      } else {
        log.error('unknown claim answer; claiming stops', { status: answer.status });
        return;
      }
    }
  }

  async #runBatch(session, batch) {
    const { log, counters, emit } = this.#ctx;
    const ids = new Set(batch.runs.map((r) => r.runId));
    let failed = [];
    const started = now();
    try {
      const result = await this.#ctx.enqueue(batch.runs, { batch });
      if (result && Array.isArray(result.failedRunIds)) {
        failed = [...new Set(result.failedRunIds)].filter((id) => ids.has(id));
      }
    } catch (error) {
      log.error('enqueue failed for the whole batch; reporting every run failed', { error, batchId: batch.id });
      failed = [...ids];
    }
    counters.batches++;
    counters.runsEnqueued += ids.size - failed.length;
    counters.runFailures += failed.length;
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
    log.info('batch enqueued', summary);
    emit('batch', summary);
    // The complete is off the path from one batch to the next: it goes while the next batch (the
    // claim sent ahead) is enqueued. At most one is on its way; the one before ends first.
    await this.#completing;
    this.#completing = this.#complete(session, batch, failed, summary)
      .catch((error) => log.error('complete failed', { error, batchId: batch.id }))
      .finally(() => (this.#completing = null));
  }

  /**
   * Completes even when fenced meanwhile: the service decides whether this fence still counts.
   * Retried while the service answers 5xx, 429 or not at all, up to `completeAttempts` tries; a
   * stop() during a pause between tries ends them at once (the batch is then leased again once
   * its lease runs out).
   */
  async #complete(session, batch, failed, summary) {
    const { o, api, log, life, counters, emit } = this.#ctx;
    for (let attempt = 1; ; attempt++) {
      try {
        const answer = await api.complete(session.token, batch.id, batch.fence, failed);
        emit('completed', { ...summary, answer });
        return;
      } catch (error) {
        const retry = error instanceof RollcallError && error.retryable && attempt < o.completeAttempts;
        if (retry && !life.stopping) {
          await this.#ctx.sleep(retryDelay(error, attempt));
          if (!life.stopping) continue;
        }
        counters.completesRefused++;
        const stopped = retry; // it would have tried again, but stop() was called
        const level = error.status === 409 || error.gone || stopped ? 'warn' : 'error';
        log[level](
          stopped
            ? 'complete not tried again: stopping (the service leases the batch again when its lease runs out)'
            : error.status === 409
              ? 'complete refused: the batch was leased again meanwhile (its runs may be enqueued twice)'
              : 'complete refused',
          { error, batchId: batch.id, fence: batch.fence },
        );
        emit('complete-refused', { ...summary, status: error.status, type: error.type, error });
        session.fencedBy(error);
        return;
      }
    }
  }
}
