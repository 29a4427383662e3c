// The edge worker's routes: which paths floodgate limits, how, and what
// happens when floodgate cannot answer. worker.ts wraps the origin with
// them; this module holds everything but the Worker's default export
// (the Workers runtime takes a main module's other exports as entry
// points).
//
// The Worker's sliding window ran over Upstash's HTTP API (MGET, then INCR
// and EXPIRE: three round trips and a race); it asks floodgate one
// question per request instead, and floodgate decides atomically.
import type { CheckRequest, FailureMode } from "@floodgate/client";
import { identify, type FloodgateEnv, type WorkerCheck } from "@floodgate/client/worker";

/** The Worker's bindings (wrangler.toml [vars] and secrets). */
export interface Env extends FloodgateEnv {
  /** The origin to forward allowed requests to; unset forwards the request as it came (Cloudflare's origin). */
  ORIGIN_URL?: string;
}

/** One limited route: the first whose prefix matches a path decides. */
export interface Route {
  /** Path prefix, e.g. "/login". */
  prefix: string;
  /** Names the route in keys. */
  name: string;
  /**
   * What to do when floodgate cannot answer (down, slow): "closed" answers
   * 503 (login, OTP: never unlimited), "open" lets the request through
   * (ordinary API calls: an outage of the limiter must not become an
   * outage of the API).
   */
  failureMode: FailureMode;
  /** The limit, without the key: inline or a policy. */
  limit: Omit<CheckRequest, "key">;
}

export const ROUTES: readonly Route[] = [
  // The login limit: 5 per 15 minutes, sliding window, fail closed.
  { prefix: "/login", name: "login", failureMode: "closed", limit: { algorithm: "sliding_window", limit: { requests: 5, period: "15m" } } },
  { prefix: "/otp", name: "otp", failureMode: "closed", limit: { algorithm: "sliding_window", limit: { requests: 3, period: "5m" } } },
  // The API limit: 100 per minute per API key, with a burst, fail open.
  { prefix: "/api/", name: "api", failureMode: "open", limit: { algorithm: "token_bucket", limit: { requests: 100, period: "1m", burst: 20 } } },
];

/** The route that limits path, or undefined for an unlimited one. */
export function routeFor(path: string): Route | undefined {
  return ROUTES.find((r) => path === r.prefix || path.startsWith(r.prefix));
}

/** The check of a request: its route's limit, keyed by API key (hashed) or address; null for an unlimited route. */
export async function checkFor(request: Request): Promise<WorkerCheck | null> {
  const route = routeFor(new URL(request.url).pathname);
  if (!route) return null;
  return { key: `${route.name}:${await identify(request)}`, failureMode: route.failureMode, ...route.limit };
}

/** The origin: ORIGIN_URL, or the request as it came. */
export const origin = {
  fetch(request: Request, env: Env): Promise<Response> {
    if (!env.ORIGIN_URL) return fetch(request);
    const url = new URL(request.url);
    return fetch(new Request(new URL(url.pathname + url.search, env.ORIGIN_URL), request));
  },
};
