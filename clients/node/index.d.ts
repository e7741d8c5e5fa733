// Type declarations of @rollcall/client (the implementation is plain ESM under src/).

/** A run Rollcall handed out in a batch. */
export interface HandedOutRun {
  runId: string;
  workflowName: string;
  queueName: string;
  /** Why it is re-driven: `pending`, `owner-dead`, `unclassified`, … */
  reason: string;
  /** Set for runs taken over from a dead instance. */
  deadInstanceId?: string;
  /**
   * The queue message that owns the run's interrupted step: re-drive with exactly this message id
   * (and no job key). Absent: a fresh message id.
   */
  messageId?: string;
}

export interface LeasedBatch {
  id: number;
  epochId: number;
  epochKind: 'boot' | 'takeover' | (string & {});
  fence: number;
  leaseExpiresAt: string;
  runs: HandedOutRun[];
}

/**
 * Enqueues the runs of one batch. Resolve with the ids that could not be enqueued (or nothing
 * when all were); throwing counts every run of the batch as failed. Failed runs are handed out
 * again by Rollcall.
 */
export type Enqueue = (
  runs: HandedOutRun[],
  context: { batch: LeasedBatch },
) => Promise<{ failedRunIds?: string[] } | void>;

/** One in-flight execution as the service accepts it: a run id, or a run and its queue message id. */
export type InFlightEntry = string | { runId: string; messageId?: string };

/** What is executing in this process right now. */
export interface Tracker {
  /** Marks a run as executing, delivered by queue message `messageId` when known; pair with exactly one `end`. */
  begin(runId: string, messageId?: string): void;
  end(runId: string, messageId?: string): void;
  /** Runs `fn` with `runId` (delivered by `messageId`) in flight, however it ends. */
  wrap<T>(runId: string, fn: () => Promise<T> | T, messageId?: string): Promise<T>;
  /** The distinct run ids in flight. */
  list(): string[];
  /** The in-flight set as heartbeats send it: `{runId, messageId}` per execution whose message id is known, else the run id. */
  entries(): InFlightEntry[];
  has(runId: string): boolean;
  readonly size: number;
}

export interface Logger {
  debug?(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn?(msg: string, fields?: Record<string, unknown>): void;
  error?(msg: string, fields?: Record<string, unknown>): void;
}

/** Anything with node-postgres' `query(text, values)`: a `pg` Pool. */
export interface Queryable {
  query(text: string, values?: unknown[]): Promise<{ rows: any[] }>;
}

export interface RecoveryOptionsBase {
  /** The service's base URL, e.g. `http://rollcall:8080`. */
  url: string;
  namespace: string;
  /** The namespace's registration secret. */
  registrationSecret: string;
  /** Identical for every replica of one rollout, different for the next. */
  deploymentId: string;
  /** This process's name in Rollcall's records; default `<hostname>-<pid>`. */
  name?: string;
  /** The engine's queue worker ids in this process, if known. */
  workerIds?: string[];
  /**
   * The engine's queue worker ids as they are found (see `noticingPool`): named at registration
   * and, when found later, in the next heartbeat (within `reportPromptlyMs`).
   */
  queueWorkers?: QueueWorkers;
  /** The in-flight set heartbeats carry: a tracker or a function; default a fresh tracker (`handle.tracker`). */
  inFlight?: Tracker | (() => InFlightEntry[]);
  /** Stops the client when aborted, like `stop()`. */
  signal?: AbortSignal;
  /** Stop (and leave) on these signals, then let the signal do what it would have; `true` = SIGTERM and SIGINT. */
  handleSignals?: boolean | NodeJS.Signals | NodeJS.Signals[];
  /** What to do when the service stays unreachable past `registerDeadlineMs` at boot. Default `skip`. */
  fallback?: 'skip' | 'local';
  /** The engine's own full recovery, run once for fallback `local`. */
  localRecovery?: () => Promise<void>;
  /** After a `skip` fallback, keep trying to register and take part once registered. Default true. */
  rejoin?: boolean;
  /** How long boot registration is retried before the fallback. Default 30 000. */
  registerDeadlineMs?: number;
  /** Runs per batch asked for (1..5000); the service's default (500) when unset. */
  maxRuns?: number;
  /** Deadline of one HTTP request. Default 10 000 (heartbeats: at most twice the heartbeat interval). */
  requestTimeoutMs?: number;
  /** How long `stop()` waits for the batch in hand. Default 10 000. */
  stopTimeoutMs?: number;
  /** Attempts at completing a batch when the service answers 5xx, 429 or not at all. Default 5. */
  completeAttempts?: number;
  /**
   * New work a tracker reports (a delivery that began) is sent in a heartbeat this many ms later
   * rather than at the next regular beat; at most one such beat a second. 0 turns it off.
   * Default 250.
   */
  reportPromptlyMs?: number;
  /** Default: JSON lines on stderr. `false` silences it. */
  logger?: Logger | false;
  /** Called (like the `fenced` event) when this instance fenced itself. */
  onFenced?: (event: FencedEvent) => void;
  /** A fetch implementation to send the service's calls; default a built-in node:http transport. */
  fetch?: typeof fetch;
  /**
   * The database's connection string (the engine's, e.g. `WORKFLOW_POSTGRES_URL`). Given (or the
   * given `pool`'s), the client holds its session lock in a dedicated session of its own.
   */
  connectionString?: string;
  /**
   * The session lock: `false` turns it off; a function returning a connected pg Client supplies
   * the dedicated session. Default: on when a connection string is known.
   */
  sessionLock?: false | (() => Promise<SessionClient>);
}

/** A dedicated database session (a pg `Client`, never a pool). */
export interface SessionClient extends Queryable {
  on(event: 'error' | 'end', fn: (error?: Error) => void): unknown;
  end(): Promise<void>;
}

export type SessionLockState = 'held' | 'lost' | 'unavailable' | 'off';

export interface SessionLockEvent {
  instanceId: string;
  state: Exclude<SessionLockState, 'off'>;
  /** Why it is not held: `connecting`, `session-ended`, `taken` (a key collision), `pooled`, `error`. */
  reason: string | null;
  pid: number | null;
}

export interface RecoveryOptionsWithEnqueue extends RecoveryOptionsBase {
  enqueue: Enqueue;
  pool?: never;
}

export interface RecoveryOptionsWithPool extends RecoveryOptionsBase {
  /** A pg Pool on the engine's database: the built-in graphile-worker enqueuer is used. */
  pool: Queryable;
  /** The engine's job prefix (WORKFLOW_POSTGRES_JOB_PREFIX). Default `workflow_`. */
  jobPrefix?: string;
  /** graphile-worker's schema. Default `graphile_worker`. */
  graphileSchema?: string;
  enqueue?: never;
}

export type RecoveryOptions = RecoveryOptionsWithEnqueue | RecoveryOptionsWithPool;

export interface RecoveryStats {
  registrations: number;
  claims: number;
  batches: number;
  runsEnqueued: number;
  runFailures: number;
  waits: number;
  epochsDone: number;
  leaseRenewals: number;
  heartbeatFailures: number;
  fencedEvents: number;
  /** Times the lease ran out on the local clock with no heartbeat answered (`lease-lapsed`). */
  leaseLapses: number;
  /** Times new queue jobs were held back (`jobs-held`). */
  jobHolds: number;
  completesRefused: number;
  fallbacks: number;
  /** Leaves that failed (also reported as `leave-failed`). */
  leaveFailures: number;
}

export type RecoveryOutcome =
  | { status: 'done'; epochId: number }
  | { status: 'fallback'; mode: 'skip' | 'local'; error?: unknown }
  | { status: 'failed'; error: RollcallError }
  | { status: 'stopped' };

export interface RegisteredEvent {
  instanceId: string;
  previousInstanceId: string | null;
  leaseTtlMs: number;
  heartbeatIntervalMs: number;
}

export interface FencedEvent {
  instanceId: string;
  /** The service answered that the instance is no longer live (a 410, or a 401 to its token). */
  reason: 'gone';
  error?: RollcallError;
}

export interface JobGateEvent {
  instanceId: string | null;
  reason: 'lease-lapsed' | 'lease-renewed' | 'rollcall-away' | 'fenced' | 'registered' | 'stopping';
}

export interface BatchEvent {
  batchId: number;
  epochId: number;
  epochKind: string;
  fence: number;
  runs: number;
  enqueued: number;
  failed: number;
  enqueueMs: number;
  instanceId: string;
}

export interface RecoveryEvents {
  registered: RegisteredEvent;
  batch: BatchEvent;
  completed: BatchEvent & { answer: unknown };
  'complete-refused': BatchEvent & { status: number; type: string; error: RollcallError };
  wait: { retryAfterMs: number };
  done: { epochId: number; instanceId: string };
  fenced: FencedEvent;
  /** No heartbeat answered for a lease TTL: the instance and its session lock are kept, heartbeats go on. */
  'lease-lapsed': { instanceId: string };
  /** A heartbeat was answered after a lapse: the same instance goes on. */
  'lease-renewed': { instanceId: string };
  /**
   * The `queueWorkers` take no new job: the lease lapsed while the database shows the service
   * running, or the service said the instance is gone. Jobs already running go on.
   */
  'jobs-held': JobGateEvent;
  /** The `queueWorkers` take new jobs again: renewed, registered again, Rollcall seen away, or stopping. */
  'jobs-resumed': JobGateEvent;
  fallback: { mode: 'skip' | 'local'; error: unknown };
  failed: { error: RollcallError };
  stopped: { stats: RecoveryStats };
  'session-lock': SessionLockEvent;
  /** The leave was not recorded: the service goes by the lease (`error.gone`: it had already declared the instance gone). */
  'leave-failed': { instanceId: string; error: RollcallError };
}

/**
 * The client's life cycle. Moves: new → registering | stopping; registering → active | fallback |
 * failed | stopping; fallback → active | stopping; active → fenced | stopping; fenced → active |
 * stopping; failed → stopping; stopping → stopped. No others.
 */
export type RecoveryState = 'new' | 'registering' | 'active' | 'fenced' | 'fallback' | 'failed' | 'stopping' | 'stopped';

export declare class RecoveryClient {
  constructor(options: RecoveryOptions);
  /** Resolves once with how this boot's recovery ended; never rejects. */
  readonly recovered: Promise<RecoveryOutcome>;
  /** The tracker heartbeats read (null when `inFlight` was a function). */
  readonly tracker: Tracker | null;
  readonly stats: RecoveryStats;
  readonly state: RecoveryState;
  readonly instanceId: string | null;
  /** The session lock of the current registration. */
  readonly sessionLock: SessionLockState;
  /** True while no heartbeat has been answered for a lease TTL (see `lease-lapsed`). */
  readonly leaseLapsed: boolean;
  on<E extends keyof RecoveryEvents>(event: E, fn: (payload: RecoveryEvents[E]) => void): () => void;
  once<E extends keyof RecoveryEvents>(event: E, fn: (payload: RecoveryEvents[E]) => void): () => void;
  off<E extends keyof RecoveryEvents>(event: E, fn: (payload: RecoveryEvents[E]) => void): void;
  start(): void;
  /**
   * Stops claiming, finishes the batch in hand (pauses between its complete's tries end at once),
   * stops heartbeats and leaves with the in-flight set; a failed leave is reported as
   * `leave-failed`, never as a rejection.
   * `exiting: true` when the process exits right after (executions still running end only then):
   * Rollcall then shortens the lease to its departure grace instead of releasing this process's
   * queue locks at once.
   */
  stop(options?: { exiting?: boolean }): Promise<void>;
}

/** Starts taking part in shared recovery; returns at once. */
export declare function startRecovery(options: RecoveryOptions): RecoveryClient;

/** A connected session of its own, made with the given pg `Client` class (TCP keepalive on). */
export declare function openSession(
  Client: new (config: object) => SessionClient & { connect(): Promise<void> },
  connectionString: string,
): Promise<SessionClient>;

export declare class RollcallError extends Error {
  readonly type: string;
  /** HTTP status; 0 when the service gave no answer. */
  readonly status: number;
  readonly title?: string;
  readonly detail?: string;
  readonly problem?: Record<string, unknown>;
  readonly operation?: string;
  /** How long a 429 or 503 asked to wait (the problem's `retryAfterMs`, else `Retry-After`); null when it did not say. */
  readonly retryAfterMs: number | null;
  readonly slug: string;
  /** No answer, a 429, or a 5xx. */
  readonly retryable: boolean;
  /** The service says the instance is no longer live (fenced): a 410, or a 401 to a call made with the instance token. */
  readonly gone: boolean;
}

export declare const PROBLEM_PREFIX: 'urn:rollcall:problem:';
export declare const UNREACHABLE: 'urn:rollcall:client:unreachable';
export declare const BAD_RESPONSE: 'urn:rollcall:client:bad-response';
export declare const MAX_IN_FLIGHT: number;

export declare function createTracker(): Tracker;

/** The built-in enqueuer: one graphile-worker `add_jobs` round trip per batch. */
export declare function graphileEnqueuer(options: {
  pool: Queryable;
  jobPrefix?: string;
  schema?: string;
}): (runs: HandedOutRun[]) => Promise<{ failedRunIds: string[] }>;

export interface EngineMessage {
  attempt: 1;
  messageId: string;
  id: string;
  /** base64 of the JSON body `{"runId": …}` */
  data: string;
}

export declare function workflowMessage(id: string, runId: string, messageId?: string): EngineMessage;
export declare function jobSpecs(
  runs: (Pick<HandedOutRun, 'runId' | 'workflowName' | 'queueName'> & { messageId?: string })[],
  options?: { jobPrefix?: string; maxAttempts?: number },
): { identifier: string; payload: EngineMessage; max_attempts: number; job_key?: string }[];
/** True for a message id the engine accepts (`msg_…`). */
export declare function isMessageId(value: unknown): value is string;
export declare function routeOf(run: { queueName?: string; workflowName?: string }, jobPrefix?: string): { task: string; id: string };
export declare function newMessageId(): string;
export declare function monotonicUlid(): (now?: number) => string;

/** Any world whose queue handlers the workflow runtime builds with `createQueueHandler`. */
export interface QueueHandlerWorld {
  createQueueHandler(prefix: any, handler: (message: unknown, meta: any) => Promise<any>): (req: Request) => Promise<Response>;
}

/**
 * Makes the world's queue handlers report the run they execute and its message id to `tracker`;
 * patches in place. `admit`, when it returns a promise, holds a delivery back until it settles.
 */
export declare function trackWorld<W extends QueueHandlerWorld>(
  world: W,
  tracker: Tracker,
  options?: { admit?: () => Promise<unknown> | null | undefined },
): W;
/** Starts a world-postgres world's queue without the engine's own re-enqueue of every active run. */
export declare function startWorldWithoutRecovery(world: { start(): Promise<void>; runs: { list: (...args: any[]) => Promise<any> } }): Promise<void>;
export declare function runIdOfMessage(prefix: string, message: unknown): string | undefined;
/** The queue message id of one delivery: the handler's `meta.messageId`, else the message's `messageId`. */
export declare function messageIdOf(message: unknown, meta: unknown): string | undefined;

export declare function backoff(attempt: number, base?: number, max?: number): number;
export declare function jsonLogger(options?: { level?: 'debug' | 'info' | 'warn' | 'error'; stream?: { write(s: string): unknown } }): Required<Logger>;
export declare const silentLogger: Required<Logger>;

export declare class RollcallApi {
  constructor(options: {
    url: string;
    fetch?: typeof fetch;
    requestTimeoutMs?: number;
    /** The trace headers of each request; by default the W3C `traceparent` of the active span when the application has `@opentelemetry/api`. */
    traceHeaders?: () => Promise<Record<string, string>>;
  });
  register(secret: string, body: { namespace: string; deploymentId: string; name: string; workerIds?: string[] }): Promise<{
    instanceId: string;
    token: string;
    leaseExpiresAt: string;
    leaseTtlMs: number;
    heartbeatIntervalMs: number;
  }>;
  claim(token: string, maxRuns?: number): Promise<
    | { status: 'batch'; batch: LeasedBatch }
    | { status: 'wait'; retryAfterMs: number }
    | { status: 'done'; epochId: number }
  >;
  complete(token: string, batchId: number, fence: number, failedRunIds: string[]): Promise<{
    batchId: number;
    state: string;
    enqueued: number;
    failed: number;
    retried: number;
    alreadyCompleted: boolean;
  }>;
  heartbeat(token: string, instanceId: string, inFlight?: InFlightEntry[], timeoutMs?: number): Promise<{ leaseExpiresAt: string; recoveryPending: boolean; recheckAfterMs?: number }>;
  leave(token: string, instanceId: string, inFlight?: InFlightEntry[]): Promise<null>;
}

/** The queue worker ids of this process, collected by a `noticingPool`. */
export declare class QueueWorkers {
  /** The ids seen so far, in the order first seen. */
  list(): string[];
  readonly size: number;
  /** Calls `listener` for each id seen from now on; returns the function that stops it. */
  onNew(listener: (id: string) => void): () => void;
  /** Adds an id; true when it was new. At most MAX_QUEUE_WORKERS are kept. */
  add(id: string): boolean;
  /** Looks at one query as pg's `Client#query` receives it. */
  noticeQuery(config: unknown, values?: unknown[]): void;
  /** True while the workers' taking of new jobs is held back (answered "no job"). */
  readonly jobsHeld: boolean;
  /** Holds (true) or lets go (false) the taking of new jobs; true when that changed. */
  holdJobs(held: boolean): boolean;
  /** Statements that would have taken jobs, answered "no job" while held. */
  readonly heldFetches: number;
  /** True (and counted) when `config` is a worker taking jobs while they are held. */
  holdsBack(config: unknown): boolean;
  /** Counts a statement taking jobs sent to the database; call what it returns once answered. */
  takeSent(): () => void;
  /** Resolves once no statement taking jobs is unanswered (while held: no job is taken from then on). */
  settled(): Promise<void>;
}

/**
 * The client's rule for its `queueWorkers`: no new job while fenced, nor while the lease has
 * lapsed unless the database shows the service away; new jobs otherwise.
 */
export declare function mayTakeJobs(at: { state: RecoveryState; lapsed: boolean; serviceAway?: boolean }): boolean;

/** True for the statement by which a graphile-worker worker (or worker pool) takes jobs to run. */
export declare function takesJobs(text: unknown): boolean;

/** Rollcall keeps at most this many worker ids per instance. */
export declare const MAX_QUEUE_WORKERS: number;

/**
 * A pg Pool (of the `pg` module given: the one the engine uses) whose clients tell `workers` the
 * id of every graphile-worker worker that polls for a job through it. Give it to the engine
 * (`createWorld({ pool, ... })`) and `workers` to `startRecovery({ queueWorkers })`.
 */
export declare function noticingPool(
  pg: { Pool: new (options: any) => any; Client: new (...args: any[]) => any },
  options: Record<string, unknown>,
  workers: QueueWorkers,
): any;
