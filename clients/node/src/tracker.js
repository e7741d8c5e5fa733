/**
 * The in-flight set: the executions this process is running right now. Heartbeats carry it, so
 * Rollcall never re-drives a run a live instance is working on, and can take over exactly these
 * runs when this instance dies.
 *
 * An execution is a run id and, when known, the queue message id that delivered it. The message
 * id lets Rollcall find the graphile job (its `key`) and the worker that locked it, so it learns
 * this process's queue workers from the queue itself and can release their locks when it dies.
 *
 * Counted, not a plain set: the same run may be executing twice at once (a workflow replay and
 * one of its steps), and it stays in flight until both ended.
 */
export function createTracker() {
  // key "<runId>\0<messageId or empty>" -> {runId, messageId, count}
  const executions = new Map();
  const keyOf = (runId, messageId) => `${runId}\u0000${messageId ?? ''}`;
  // Told when an execution begins that was not in flight before (see onBegin).
  const beginListeners = new Set();

  const tracker = {
    /**
     * Marks `runId` as executing, delivered by queue message `messageId` when known; pair it with
     * exactly one `end(runId, messageId)`.
     */
    begin(runId, messageId) {
      if (typeof runId !== 'string' || runId === '') {
        throw new TypeError('tracker.begin needs a run id');
      }
      const id = typeof messageId === 'string' && messageId !== '' ? messageId : undefined;
      const key = keyOf(runId, id);
      const entry = executions.get(key);
      if (entry) entry.count++;
      else {
        executions.set(key, { runId, messageId: id, count: 1 });
        for (const listener of beginListeners) listener(runId, id);
      }
    },
    /**
     * Calls `listener(runId, messageId)` whenever an execution begins that was not in flight yet;
     * returns the function that stops it. The client uses it to report new work promptly.
     */
    onBegin(listener) {
      beginListeners.add(listener);
      return () => beginListeners.delete(listener);
    },
    /** Ends one `begin(runId, messageId)`; extra calls are ignored. */
    end(runId, messageId) {
      const id = typeof messageId === 'string' && messageId !== '' ? messageId : undefined;
      const key = keyOf(runId, id);
      const entry = executions.get(key);
      if (!entry) return;
      if (entry.count <= 1) executions.delete(key);
      else entry.count--;
    },
    /** Runs `fn` with `runId` (delivered by `messageId`, when given) in flight, however `fn` ends. */
    async wrap(runId, fn, messageId) {
      tracker.begin(runId, messageId);
      try {
        return await fn();
      } finally {
        tracker.end(runId, messageId);
      }
    },
    /** The distinct run ids in flight now. */
    list() {
      return [...new Set([...executions.values()].map((e) => e.runId))];
    },
    /**
     * The in-flight set as heartbeats send it: `{runId, messageId}` for every distinct execution
     * whose message id is known, and a bare run id for a run in flight with no known message id.
     */
    entries() {
      const withMessage = new Set();
      const out = [];
      for (const e of executions.values()) {
        if (e.messageId) {
          withMessage.add(e.runId);
          out.push({ runId: e.runId, messageId: e.messageId });
        }
      }
      for (const e of executions.values()) {
        if (!e.messageId && !withMessage.has(e.runId)) {
          withMessage.add(e.runId);
          out.push(e.runId);
        }
      }
      return out;
    },
    has(runId) {
      for (const e of executions.values()) if (e.runId === runId) return true;
      return false;
    },
    /** The number of distinct runs in flight. */
    get size() {
      return tracker.list().length;
    },
  };
  return tracker;
}

/** An in-flight entry as the service accepts it: a run id, or `{runId, messageId?}`. */
function isEntry(e) {
  if (typeof e === 'string') return e !== '';
  return (
    e !== null &&
    typeof e === 'object' &&
    typeof e.runId === 'string' &&
    e.runId !== '' &&
    (e.messageId === undefined || (typeof e.messageId === 'string' && e.messageId !== ''))
  );
}

/**
 * Accepts a tracker, a `() => (string | {runId, messageId})[]` or nothing, and returns what the
 * client needs: the tracker (or null) and `list()`, the entries to send (malformed ones dropped).
 */
export function toInFlightSource(inFlight) {
  const clean = (entries) => (Array.isArray(entries) ? entries.filter(isEntry) : entries);
  if (inFlight == null) {
    const tracker = createTracker();
    return { tracker, list: () => tracker.entries() };
  }
  if (typeof inFlight === 'function') {
    return { tracker: null, list: () => clean(inFlight()) };
  }
  if (typeof inFlight.entries === 'function') {
    return { tracker: inFlight, list: () => clean(inFlight.entries()) };
  }
  if (typeof inFlight.list === 'function') {
    return { tracker: inFlight, list: () => clean(inFlight.list()) };
  }
  throw new TypeError('inFlight must be a tracker (with list()) or a function returning in-flight entries');
}
