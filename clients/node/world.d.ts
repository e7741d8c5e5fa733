// Type declarations of @rollcall/client/world, the zero-code world module.
import type { RecoveryClient, Logger } from './index.js';

/**
 * Creates a @workflow/world-postgres world wired to Rollcall, from the environment
 * (`ROLLCALL_URL`, `ROLLCALL_NAMESPACE`, `ROLLCALL_SECRET`, `ROLLCALL_DEPLOYMENT_ID`,
 * `WORKFLOW_POSTGRES_URL`, optional `ROLLCALL_NAME`, `ROLLCALL_FALLBACK`,
 * `ROLLCALL_WORLD_PACKAGE`, and the stock world's own `WORKFLOW_POSTGRES_*`). The Workflow SDK
 * calls it when `WORKFLOW_TARGET_WORLD=@rollcall/client/world`. Throws, naming every missing or
 * bad variable. The returned world is the engine's, with `start()` (queue without the engine's
 * re-enqueue, then Rollcall), `queue()` and `close()` (queue, then leave) wrapped.
 */
export declare function createWorld(options?: { logger?: Logger | false; fetch?: typeof fetch }): any;
export default createWorld;

/** The settings the module reads; throws one Error naming every missing or bad variable. */
export declare function worldSettings(env?: Record<string, string | undefined>): {
  url: string;
  namespace: string;
  registrationSecret: string;
  deploymentId: string;
  databaseUrl: string;
  name: string;
  jobPrefix: string;
  fallback: 'skip' | 'local';
  worldPackage: string;
};

/** The required environment variables and what each one is. */
export declare const WORLD_SETTINGS: Readonly<Record<string, string>>;

/** This process's Rollcall client once a world has started, else null. */
export declare function rollcallClient(): RecoveryClient | null;
