/**
 * The in-flight set: the run ids this process is executing right now. Heartbeats carry it, so
 * Rollcall never re-drives a run a live instance is working on, and can take over exactly these
 * runs when this instance dies.
 *
 * Counted, not a plain set: the same run may be executing twice at once (a workflow replay and
 * one of its steps), and it stays in flight until both ended.
 */
export function createTracker() {
  const counts = new Map();

  const tracker = {
    /** Marks `runId` as executing; pair it with exactly one `end(runId)`. */
    begin(runId) {
      if (typeof runId !== 'string' || runId === '') {
        throw new TypeError('tracker.begin needs a run id');
      }
      counts.set(runId, (counts.get(runId) ?? 0) + 1);
    },
    /** Ends one `begin(runId)`; extra calls are ignored. */
    end(runId) {
      const n = counts.get(runId);
      if (n === undefined) return;
      if (n <= 1) counts.delete(runId);
      else counts.set(runId, n - 1);
    },
    /** Runs `fn` with `runId` in flight, however `fn` ends. */
    async wrap(runId, fn) {
      tracker.begin(runId);
      try {
        return await fn();
      } finally {
        tracker.end(runId);
      }
    },
    /** The run ids in flight now. */
    list() {
      return [...counts.keys()];
    },
    has(runId) {
      return counts.has(runId);
    },
    get size() {
      return counts.size;
    },
  };
  return tracker;
}

/** Accepts a tracker, a `() => string[]` or nothing, and returns what the client needs. */
export function toInFlightSource(inFlight) {
  if (inFlight == null) {
    const tracker = createTracker();
    return { tracker, list: () => tracker.list() };
  }
  if (typeof inFlight === 'function') {
    return { tracker: null, list: () => inFlight() };
  }
  if (typeof inFlight.list === 'function') {
    return { tracker: inFlight, list: () => inFlight.list() };
  }
  throw new TypeError('inFlight must be a tracker (with list()) or a function returning run ids');
}
