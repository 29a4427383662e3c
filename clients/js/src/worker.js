// A Cloudflare Workers helper: wraps a Worker's fetch handler so that each
// request is checked with floodgate first. Web APIs only (fetch, Request,
// Response, crypto.subtle), so it runs on Deno and Bun servers too.
import { Floodgate, FloodgateError } from "./index.js";

/** Default wait for floodgate in a Worker, in ms: well above its decision time, well below a user's patience. */
export const DEFAULT_WORKER_TIMEOUT_MS = 250;

/**
 * Who is asking: the API key (its SHA-256, so floodgate's store never
 * holds a secret) or else the client's address, which Cloudflare puts in
 * CF-Connecting-IP.
 */
export async function identify(request, { apiKeyHeader = "x-api-key" } = {}) {
  const apiKey = request.headers.get(apiKeyHeader)?.trim();
  if (apiKey) {
    const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(apiKey));
    const hex = Array.from(new Uint8Array(digest).slice(0, 16), (b) => b.toString(16).padStart(2, "0")).join("");
    return `key:${hex}`;
  }
  return `ip:${request.headers.get("cf-connecting-ip") ?? "unknown"}`;
}

/** A client from the Worker's bindings: FLOODGATE_URL, FLOODGATE_TOKEN, FLOODGATE_TIMEOUT_MS. */
export function floodgateFromEnv(env) {
  if (!env?.FLOODGATE_URL) throw new TypeError("the Worker needs FLOODGATE_URL (wrangler.toml [vars])");
  return new Floodgate({
    url: env.FLOODGATE_URL,
    token: env.FLOODGATE_TOKEN,
    timeoutMs: Number(env.FLOODGATE_TIMEOUT_MS ?? DEFAULT_WORKER_TIMEOUT_MS),
  });
}

function json(status, body, headers = {}) {
  return new Response(JSON.stringify(body), {
    status,
    headers: { ...headers, "content-type": "application/json", "cache-control": "no-store" },
  });
}

/**
 * withRateLimit wraps handler (an object with fetch(request, env, ctx), as
 * a Worker's default export) so that each request is checked first:
 *
 *   export default withRateLimit({ fetch: (req) => fetch(req) }, {
 *     check: async (request) => ({ key: "api:" + await identify(request), algorithm: "token_bucket", limit: { requests: 100, period: "1m" } }),
 *   });
 *
 * options:
 * - check(request, env): the check to make ({ key, policy } or { key,
 *   algorithm, limit }, and failureMode "open" or "closed" for this
 *   request), or null to let the request through unchecked.
 * - floodgate(env): the client; default floodgateFromEnv.
 *
 * A denial answers 429 {"error":"rate_limit_exceeded","retry_after_seconds":N}
 * with floodgate's rate-limit headers; an allowed request is handled and
 * its response gets the headers. When floodgate cannot decide, a check
 * whose failureMode is "closed" answers 503 {"error":"rate_limiter_unavailable"}
 * with Retry-After: 1, and "open" (the default) handles the request, marked
 * X-RateLimit-Degraded: true. A configuration error (a bad token, an
 * unknown policy) is a 500: no outage explains it.
 */
export function withRateLimit(handler, { check, floodgate = floodgateFromEnv } = {}) {
  if (typeof handler?.fetch !== "function") throw new TypeError("withRateLimit: handler must have fetch(request, env, ctx)");
  if (typeof check !== "function") throw new TypeError("withRateLimit: check(request, env) is required");
  return {
    async fetch(request, env, ctx) {
      const req = await check(request, env);
      if (!req) return handler.fetch(request, env, ctx);
      const { failureMode = "open", ...checkReq } = req;
      let d;
      try {
        d = await floodgate(env).check(checkReq, { failureMode });
      } catch (err) {
        if (!(err instanceof FloodgateError)) throw err;
        console.error(`[rate-limit] floodgate refused the check: ${err.message}`);
        return json(500, { error: "rate_limiter_misconfigured" });
      }
      if (d.error) console.error(`[rate-limit] floodgate unavailable, failing ${failureMode}: ${d.error.message}`);
      if (!d.allowed) {
        if (d.error) return json(503, { error: "rate_limiter_unavailable" }, d.headers);
        return json(429, { error: "rate_limit_exceeded", retry_after_seconds: Math.ceil(d.retryAfterMs / 1000) }, d.headers);
      }
      const resp = await handler.fetch(request, env, ctx);
      const out = new Response(resp.body, resp); // a fetched response's headers are immutable
      for (const [name, value] of Object.entries(d.headers)) out.headers.set(name, value);
      return out;
    },
  };
}
