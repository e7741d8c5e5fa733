export { startRecovery, RecoveryClient, backoff, MAX_IN_FLIGHT } from './client.js';
export { RollcallError, PROBLEM_PREFIX, UNREACHABLE, BAD_RESPONSE } from './errors.js';
export { RollcallApi } from './http.js';
export { createTracker } from './tracker.js';
export { graphileEnqueuer, jobSpecs, workflowMessage, routeOf, newMessageId, isMessageId } from './graphile.js';
export { trackWorld, startWorldWithoutRecovery, runIdOfMessage, messageIdOf } from './world.js';
export { jsonLogger, silentLogger } from './log.js';
export { monotonicUlid } from './ulid.js';
export { openSession } from './session-lock.js';
