// A Cloudflare-style Worker that rate-limits an origin with floodgate's
// HTTP/JSON API, using nothing but fetch: the Worker, whose
// sliding window ran over Upstash's HTTP API (MGET, then INCR and EXPIRE:
// three round trips and a race), asks floodgate one question per request
// instead, and floodgate decides atomically.
//
// Per route, the rule for an unreachable limiter: sensitive routes
// (login, OTP) fail closed with a clear 503, the rest fail open.

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

/** floodgate's answer to one check, with the headers the Worker passes on. */
export interface Answer {
  decision: CheckResponse;
  headers: Headers;
}

export const ROUTES: readonly Route[] = [
  // The login limit: 5 per 15 minutes, sliding window, fail closed.
  {
    prefix: "/login",
    name: "login",
    failClosed: true,
    limit: { algorithm: "ALGORITHM_SLIDING_WINDOW", limit: { requests: 5, period: "900s" } },
  },
  {
    prefix: "/otp",
    name: "otp",
    failClosed: true,
    limit: { algorithm: "ALGORITHM_SLIDING_WINDOW", limit: { requests: 3, period: "300s" } },
  },
  // The API limit: 100 per minute per API key, with a burst, fail open.
  {
    prefix: "/api/",
    name: "api",
    failClosed: false,
    limit: { algorithm: "ALGORITHM_TOKEN_BUCKET", limit: { requests: 100, period: "60s", burst: 20 } },
  },
];

/** Headers of floodgate's answer that the Worker passes to its client. */
const PASSED_HEADERS = [
  "ratelimit",
  "ratelimit-policy",
  "x-ratelimit-limit",
  "x-ratelimit-remaining",
  "x-ratelimit-reset",
  "x-ratelimit-degraded",
  "retry-after",
] as const;

/** Default wait for floodgate, in ms: well above its decision time, well below a user's patience. */
export const DEFAULT_TIMEOUT_MS = 250;

/** The route that limits path, or undefined for an unlimited one. */
export function routeFor(path: string): Route | undefined {
  return ROUTES.find((r) => path === r.prefix || path.startsWith(r.prefix));
}

/**
 * Who is asking: the API key (hashed, so floodgate's store never holds a
 * secret) or else the client's address, which Cloudflare puts in
 * CF-Connecting-IP.
 */
export async function identify(request: Request): Promise<string> {
  const apiKey = request.headers.get("x-api-key");
  if (apiKey) {
    const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(apiKey));
    const hex = Array.from(new Uint8Array(digest).slice(0, 16), (b) => b.toString(16).padStart(2, "0")).join("");
    return "key:" + hex;
  }
  return "ip:" + (request.headers.get("cf-connecting-ip") ?? "unknown");
}

/**
 * Asks floodgate. It returns floodgate's answer and headers, or throws
 * when floodgate could not answer (unreachable, slow, or refusing the
 * request: any status but 200).
 */
export async function askFloodgate(env: Env, check: CheckRequest): Promise<Answer> {
  const timeout = Number(env.FLOODGATE_TIMEOUT_MS ?? DEFAULT_TIMEOUT_MS);
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (env.FLOODGATE_TOKEN) headers["authorization"] = "Bearer " + env.FLOODGATE_TOKEN;
  const resp = await fetch(new URL("/v1/check", env.FLOODGATE_URL), {
    method: "POST",
    headers,
    body: JSON.stringify(check),
    signal: AbortSignal.timeout(timeout),
  });
  if (resp.status !== 200) {
    // {"code": "...", "message": "..."}: a 401 or 400 is this Worker's
    // misconfiguration, a 503 floodgate's store failing closed.
    const body = await resp.text();
    throw new Error(`floodgate answered ${resp.status}: ${body.trim()}`);
  }
  return { decision: (await resp.json()) as CheckResponse, headers: resp.headers };
}

/** JSON answer of the Worker itself. */
function json(status: number, body: object, headers: Headers = new Headers()): Response {
  headers.set("content-type", "application/json");
  headers.set("cache-control", "no-store");
  return new Response(JSON.stringify(body), { status, headers });
}

/** Forwards request to the origin. */
function forward(request: Request, env: Env): Promise<Response> {
  if (!env.ORIGIN_URL) return fetch(request);
  const url = new URL(request.url);
  return fetch(new Request(new URL(url.pathname + url.search, env.ORIGIN_URL), request));
}

/** Handles one request: limited routes ask floodgate first. */
export async function handle(request: Request, env: Env): Promise<Response> {
  const route = routeFor(new URL(request.url).pathname);
  if (!route) return forward(request, env);

  const key = route.name + ":" + (await identify(request));
  let answer: Answer;
  try {
    answer = await askFloodgate(env, { key, ...route.limit });
  } catch (err) {
    // Decide now what happens when the limiter is down (the
    // decision teams panic over at 2 a.m.).
    console.error(`[rate-limit] ${route.name}: floodgate unavailable, failing ${route.failClosed ? "closed" : "open"}:`, String(err));
    if (route.failClosed) {
      return json(503, { error: "rate_limiter_unavailable" }, new Headers({ "retry-after": "1" }));
    }
    const resp = await forward(request, env);
    const out = new Response(resp.body, resp);
    out.headers.set("x-ratelimit-degraded", "true");
    return out;
  }

  const passed = new Headers();
  for (const name of PASSED_HEADERS) {
    const v = answer.headers.get(name);
    if (v !== null) passed.set(name, v);
  }
  if (!answer.decision.allowed) {
    return json(429, { error: "rate_limit_exceeded", retry_after_seconds: Number(passed.get("retry-after") ?? 1) }, passed);
  }
  const resp = await forward(request, env);
  const out = new Response(resp.body, resp); // origin's headers are immutable
  passed.forEach((v, k) => out.headers.set(k, v));
  return out;
}

/** The Worker: Cloudflare calls fetch for each request. */
const worker = {
  fetch(request: Request, env: Env): Promise<Response> {
    return handle(request, env);
  },
};

export default worker;
