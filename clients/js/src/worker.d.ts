import type { CheckRequest, FailureMode, Floodgate } from "./index.js";

export declare const DEFAULT_WORKER_TIMEOUT_MS: number;

/** The Worker's bindings the default client reads. */
export interface FloodgateEnv {
  /** floodgate's HTTP port, e.g. "https://floodgate.internal:8080". */
  FLOODGATE_URL: string;
  /** A bearer token (a secret: `wrangler secret put FLOODGATE_TOKEN`). */
  FLOODGATE_TOKEN?: string;
  /** How long to wait for floodgate, in ms; default 250. */
  FLOODGATE_TIMEOUT_MS?: string;
}

/** A Worker's handler: what its default export holds. */
export interface FetchHandler<Env> {
  fetch(request: Request, env: Env, ctx?: unknown): Response | Promise<Response>;
}

/** A check and what to do when floodgate cannot decide it. */
export type WorkerCheck = CheckRequest & { failureMode?: FailureMode };

export interface WithRateLimitOptions<Env> {
  /** The check for a request, or null to let it through unchecked. */
  check: (request: Request, env: Env) => WorkerCheck | null | undefined | Promise<WorkerCheck | null | undefined>;
  /** The client; default floodgateFromEnv. */
  floodgate?: (env: Env) => Floodgate;
}

/** The API key's SHA-256 ("key:…") or else CF-Connecting-IP ("ip:…"). */
export declare function identify(request: Request, options?: { apiKeyHeader?: string }): Promise<string>;

/** A client from FLOODGATE_URL, FLOODGATE_TOKEN, FLOODGATE_TIMEOUT_MS. */
export declare function floodgateFromEnv(env: FloodgateEnv): Floodgate;

/** Wraps a Worker's handler so each request is checked with floodgate first. */
export declare function withRateLimit<Env>(handler: FetchHandler<Env>, options: WithRateLimitOptions<Env>): { fetch(request: Request, env: Env, ctx?: unknown): Promise<Response> };
