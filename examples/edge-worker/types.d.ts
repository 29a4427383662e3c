// Types of the edge worker (worker.mjs reads them through JSDoc imports, so
// `tsc --checkJs` or an editor checks the worker against them). See
// README.md for why the worker itself is JavaScript.

/** The Worker's bindings (wrangler.toml [vars] and secrets). */
export interface Env {
  /** Where floodgate's HTTP port is, e.g. "https://floodgate.internal:8080". */
  FLOODGATE_URL: string;
  /** A floodgate bearer token (a secret: `wrangler secret put FLOODGATE_TOKEN`). */
  FLOODGATE_TOKEN?: string;
  /** How long to wait for floodgate before the route's failure mode answers, in ms. Default 250. */
  FLOODGATE_TIMEOUT_MS?: string;
  /** The origin to forward allowed requests to; unset forwards the request as it came (Cloudflare's origin). */
  ORIGIN_URL?: string;
}

/** floodgate.v1.Algorithm, by its protobuf JSON name. */
export type Algorithm =
  | "ALGORITHM_TOKEN_BUCKET"
  | "ALGORITHM_SLIDING_WINDOW"
  | "ALGORITHM_SLIDING_WINDOW_LOG"
  | "ALGORITHM_FIXED_WINDOW";

/** floodgate.v1.CheckRequest in the protobuf JSON mapping. */
export interface CheckRequest {
  key: string;
  algorithm?: Algorithm;
  cost?: number;
  /** An inline limit; period is a protobuf JSON Duration such as "900s". */
  limit?: { requests: number; period: string; burst?: number };
  /** Or a policy from floodgate's config file. */
  policy?: string;
}

/** floodgate.v1.CheckResponse in the protobuf JSON mapping (int64 as strings). */
export interface CheckResponse {
  allowed: boolean;
  limit: string;
  remaining: string;
  retryAfter: string;
  resetAfter: string;
  degraded: boolean;
}

/** One limited route: the first whose prefix matches a path decides. */
export interface Route {
  /** Path prefix, e.g. "/login". */
  prefix: string;
  /** Names the route in keys and logs. */
  name: string;
  /**
   * What to do when floodgate cannot answer (down, slow, refusing the
   * token): true answers 503 (login, OTP: never unlimited), false lets the
   * request through (ordinary API calls: an outage of the limiter must not
   * become an outage of the API).
   */
  failClosed: boolean;
  /** The limit, without the key: inline or a policy. */
  limit: Omit<CheckRequest, "key">;
}
