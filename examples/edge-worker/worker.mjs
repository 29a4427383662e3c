// @ts-check
// A Cloudflare-style Worker that rate-limits an origin with floodgate's
// HTTP/JSON API, using nothing but fetch: the seeds' Worker, whose
// sliding window ran over Upstash's HTTP API (MGET, then INCR and EXPIRE:
// three round trips and a race), asks floodgate one question per request
// instead, and floodgate decides atomically.
//
// Per route, the seeds' rule for an unreachable limiter: sensitive routes
// (login, OTP) fail closed with a clear 503, the rest fail open.

/** @typedef {import('./types').Env} Env */
/** @typedef {import('./types').Route} Route */
/** @typedef {import('./types').CheckRequest} CheckRequest */
/** @typedef {import('./types').CheckResponse} CheckResponse */

/** @type {Route[]} */
export const ROUTES = [
  // The seeds' login limit: 5 per 15 minutes, sliding window, fail closed.
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
  // The seeds' API limit: 100 per minute per API key, with a burst, fail open.
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
];

/** Default wait for floodgate, in ms: well above its decision time, well below a user's patience. */
export const DEFAULT_TIMEOUT_MS = 250;

/**
 * The route that limits path, or undefined for an unlimited one.
 * @param {string} path
 * @returns {Route | undefined}
 */
export function routeFor(path) {
  return ROUTES.find((r) => path === r.prefix || path.startsWith(r.prefix));
}

/**
 * Who is asking: the API key (hashed, so floodgate's store never holds a
 * secret) or else the client's address, which Cloudflare puts in
 * CF-Connecting-IP.
 * @param {Request} request
 * @returns {Promise<string>}
 */
export async function identify(request) {
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
 * @param {Env} env
 * @param {CheckRequest} check
 * @returns {Promise<{ decision: CheckResponse, headers: Headers }>}
 */
export async function askFloodgate(env, check) {
  const timeout = Number(env.FLOODGATE_TIMEOUT_MS ?? DEFAULT_TIMEOUT_MS);
  /** @type {Record<string, string>} */
  const headers = { "content-type": "application/json" };
  if (env.FLOODGATE_TOKEN) headers.authorization = "Bearer " + env.FLOODGATE_TOKEN;
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
  return { decision: /** @type {CheckResponse} */ (await resp.json()), headers: resp.headers };
}

/**
 * JSON answer of the Worker itself.
 * @param {number} status
 * @param {object} body
 * @param {Headers} [headers]
 */
function json(status, body, headers = new Headers()) {
  headers.set("content-type", "application/json");
  headers.set("cache-control", "no-store");
  return new Response(JSON.stringify(body), { status, headers });
}

/**
 * Forwards request to the origin.
 * @param {Request} request
 * @param {Env} env
 */
function forward(request, env) {
  if (!env.ORIGIN_URL) return fetch(request);
  const url = new URL(request.url);
  return fetch(new Request(new URL(url.pathname + url.search, env.ORIGIN_URL), request));
}

/**
 * Handles one request: limited routes ask floodgate first.
 * @param {Request} request
 * @param {Env} env
 * @returns {Promise<Response>}
 */
export async function handle(request, env) {
  const route = routeFor(new URL(request.url).pathname);
  if (!route) return forward(request, env);

  const key = route.name + ":" + (await identify(request));
  let answer;
  try {
    answer = await askFloodgate(env, { key, ...route.limit });
  } catch (err) {
    // Decide now what happens when the limiter is down (the seeds: the
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

export default {
  /**
   * The Worker's entry point.
   * @param {Request} request
   * @param {Env} env
   */
  fetch(request, env) {
    return handle(request, env);
  },
};
