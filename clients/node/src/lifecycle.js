/**
 * The client's life as one state machine; every move not in TRANSITIONS is refused.
 *
 *   new ──start()──▶ registering ──registered──▶ active ──gone (410)────────▶ fenced
 *                     │     │                      ▲ ▲                            │
 *                     │     └──deadline──▶ fallback┘ └───registered again─────────┘
 *                     │                  (rejoin: registered)
 *                     └──refused──▶ failed
 *
 *   any state but stopping and stopped ──stop()──▶ stopping ──left──▶ stopped
 *
 * `registering`: the boot registration is being tried. `active`: registered, lease held.
 * `fenced`: the service said the instance is gone; registering again as a new instance (a lease
 * that only ran out on the local clock is a lapse, not a fence: the session stays, session.js). `fallback`: the boot
 * registration ran past its deadline and the fallback ran (with `rejoin`, registering goes on).
 * `failed`: the service refused the registration. `stopping`: stop() was called; `stopped`: it
 * finished. A stopped client never moves again.
 */
export const TRANSITIONS = Object.freeze({
  new: Object.freeze(['registering', 'stopping']),
  registering: Object.freeze(['active', 'fallback', 'failed', 'stopping']),
  fallback: Object.freeze(['active', 'stopping']),
  active: Object.freeze(['fenced', 'stopping']),
  fenced: Object.freeze(['active', 'stopping']),
  failed: Object.freeze(['stopping']),
  stopping: Object.freeze(['stopped']),
  stopped: Object.freeze([]),
});

/** The current state, and the only way to change it. */
export class Lifecycle {
  #state = 'new';

  get state() {
    return this.#state;
  }

  /** True once stop() was called: nothing new is started after that. */
  get stopping() {
    return this.#state === 'stopping' || this.#state === 'stopped';
  }

  /** Moves to `next` and returns true when TRANSITIONS allows it; otherwise changes nothing and returns false. */
  to(next) {
    if (!TRANSITIONS[this.#state].includes(next)) return false;
    this.#state = next;
    return true;
  }
}
