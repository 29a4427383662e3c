/** Default wait for an answer, in milliseconds. */
export declare const DEFAULT_TIMEOUT_MS: number;

/** An algorithm, as the config file names it; the API takes TOKEN_BUCKET and ALGORITHM_TOKEN_BUCKET too. */
export type Algorithm = "token_bucket" | "sliding_window" | "sliding_window_log" | "fixed_window" | "leaky_bucket" | (string & {});

/** What a check answers when floodgate cannot decide: "open" allows, "closed" denies. */
export type FailureMode = "open" | "closed";

/** An inline limit. */
export interface Limit {
  /** Requests admitted per period. */
  requests: number;
  /** The period: milliseconds, or a duration as typed ("1m", "90s", "1h30m"). */
  period?: number | string;
  /** The period in milliseconds (the same as a number period). */
  periodMs?: number;
  /** A token bucket's capacity, a leaky bucket's queue; default requests. */
  burst?: number;
  /** A calendar window instead of a period: "day", "week", "month", "year". */
  calendar?: string;
  /** The time zone of a calendar window, e.g. "Asia/Jakarta". */
  timeZone?: string;
  /** The soft limit: an allowed answer past this many units used says warning. */
  warnAt?: number;
  /** The soft limit as a whole percentage of the capacity (1-100). */
  warnAtPercent?: number;
}

/** A check: a key and where its limit comes from (a policy of floodgate's config, or inline). */
export interface CheckRequest {
  key: string;
  /** A policy in floodgate's config file. */
  policy?: string;
  /** The algorithm of an inline limit. */
  algorithm?: Algorithm;
  /** An inline limit. */
  limit?: Limit;
  /** Units to spend; default 1. */
  cost?: number;
}

/** The rate-limit headers of an answer (lower-case names), ready to copy to a response. */
export type RateLimitHeaders = Record<string, string>;

/** A decision, numbers as numbers and durations in milliseconds. */
export interface Decision {
  allowed: boolean;
  /** The limit that applied (a token bucket's burst). */
  limit: number;
  /** Whole units still spendable now. */
  remaining: number;
  /** 0 when allowed; else the exact wait until the cost would be allowed. */
  retryAfterMs: number;
  /** When the key is back to full. */
  resetAfterMs: number;
  /** A leaky bucket's delay before the admitted request should proceed. */
  waitMs: number;
  /** floodgate (or this client, with error set) answered by a failure mode. */
  degraded: boolean;
  /** Allowed, past the limit's soft limit (warnAt): slow down. */
  warning: boolean;
  /** The soft limit in units; 0 for none. */
  warnAt: number;
  /** RateLimit, RateLimit-Policy, X-RateLimit-*, Retry-After, RateLimit-Warning, as floodgate wrote them. */
  headers: RateLimitHeaders;
  /** Set when floodgate could not decide and the failure mode answered. */
  error?: FloodgateError;
}

/** A batch's answer: allowed only when every check is. */
export interface BatchDecision {
  allowed: boolean;
  results: Decision[];
  degraded: boolean;
  headers: RateLimitHeaders;
  error?: FloodgateError;
}

/** Usage known afterwards. */
export interface SettleRequest {
  key: string;
  policy?: string;
  algorithm?: Algorithm;
  limit?: Limit;
  /** What the earlier check charged. */
  reserved: number;
  /** The usage. */
  actual: number;
  /** Names this settlement (a request id), so a retry charges nothing. */
  idempotencyKey: string;
}

export interface Settlement {
  limit: number;
  remaining: number;
  debt: number;
  retryAfterMs: number;
  resetAfterMs: number;
  unrecorded: number;
  duplicate: boolean;
  degraded: boolean;
}

export interface ResetRequest {
  key: string;
  algorithm?: Algorithm;
  policy?: string;
  limit?: Limit;
}

export interface ClientOptions {
  /** floodgate's HTTP port, e.g. "http://127.0.0.1:8080". */
  url: string;
  /** A bearer token (--auth-token-file). */
  token?: string;
  /** How long to wait for an answer; default 1000. */
  timeoutMs?: number;
  /** What check and checkBatch answer when floodgate cannot decide; default "open". */
  failureMode?: FailureMode;
  /** The fetch to use; default globalThis.fetch. */
  fetch?: typeof fetch;
}

export interface CallOptions {
  timeoutMs?: number;
  failureMode?: FailureMode;
}

/** An error floodgate answered, or the failure to get an answer. */
export declare class FloodgateError extends Error {
  /** The HTTP status; 0 when there was no answer. */
  status: number;
  /** The gRPC code's name, e.g. "INVALID_ARGUMENT", "UNAVAILABLE". */
  code: string;
  /** floodgate could not decide (unreachable, too slow, its store down): what a failure mode answers. */
  unavailable: boolean;
  constructor(message: string, options?: { status?: number; code?: string; unavailable?: boolean; cause?: unknown });
}

/** A floodgate client over its HTTP/JSON API. */
export declare class Floodgate {
  constructor(options: ClientOptions);
  readonly url: string;
  readonly timeoutMs: number;
  readonly failureMode: FailureMode;
  /** May key spend cost now? Charges it when allowed. The failure mode answers when floodgate cannot. */
  check(req: CheckRequest, opts?: CallOptions): Promise<Decision>;
  /** Several checks, all or nothing. */
  checkBatch(checks: CheckRequest[], opts?: CallOptions): Promise<BatchDecision>;
  /** What check would answer, charging nothing. Throws FloodgateError when floodgate cannot answer. */
  peek(req: CheckRequest, opts?: CallOptions): Promise<Decision>;
  /** Settles usage known afterwards. */
  settle(req: SettleRequest, opts?: CallOptions): Promise<Settlement>;
  /** Forgets a key's counts (an admin token when tokens are on). */
  reset(req: ResetRequest, opts?: CallOptions): Promise<void>;
}

/** Milliseconds of a protobuf JSON Duration such as "1.5s". */
export declare function durationMs(d: string | number | undefined | null): number;

/** The rate-limit headers of a fetch Headers, lower-case names. */
export declare function rateLimitHeaders(headers: Headers): RateLimitHeaders;
