// floodgate's HTTP/JSON API over fetch, for Node 18+, Cloudflare Workers,
// Deno and Bun alike: no dependencies, no Node built-ins.
//
// Answers come back with numbers as numbers (the API's JSON writes 64-bit
// integers as strings) and durations in milliseconds (it writes "1.5s").

/** The HTTP routes, by method. */
const PATHS = {
  check: "/v1/check",
  checkBatch: "/v1/check:batch",
  peek: "/v1/peek",
  settle: "/v1/settle",
  reset: "/v1/reset",
};

/** Default wait for an answer, in milliseconds. */
export const DEFAULT_TIMEOUT_MS = 1000;

/**
 * An error floodgate answered, or the failure to get an answer.
 * `unavailable` is true when floodgate could not decide (unreachable,
 * too slow, its store down): the case a failure mode answers. Anything
 * else (a bad token, an unknown policy, a limit floodgate rejects) is a
 * configuration error, never answered by a failure mode.
 */
export class FloodgateError extends Error {
  constructor(message, { status = 0, code = "UNAVAILABLE", unavailable = true, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = "FloodgateError";
    this.status = status;
    this.code = code;
    this.unavailable = unavailable;
  }
}

/** The HTTP statuses that mean floodgate could not decide now. */
const UNAVAILABLE_STATUSES = new Set([502, 503, 504, 408]);

/**
 * Milliseconds of a protobuf JSON Duration ("1.5s", "-2s", "0s"); 0 for
 * an absent one.
 */
export function durationMs(d) {
  if (d === undefined || d === null || d === "") return 0;
  if (typeof d === "number") return d;
  const m = /^(-)?(\d+)(?:\.(\d{1,9}))?s$/.exec(String(d));
  if (!m) throw new TypeError(`not a protobuf Duration: ${JSON.stringify(d)}`);
  const frac = (m[3] ?? "").padEnd(9, "0");
  const ms = Number(m[2]) * 1000 + Number(frac.slice(0, 3)) + (Number(frac.slice(3)) > 0 ? 1 : 0);
  return m[1] ? -ms : ms;
}

/** A period for the wire: milliseconds as "Ns", a string as typed ("1m"). */
function periodJSON(p) {
  if (typeof p === "string") return p;
  if (typeof p !== "number" || !Number.isFinite(p)) throw new TypeError(`period: want milliseconds or a duration such as "1m", got ${JSON.stringify(p)}`);
  const whole = Math.trunc(p / 1000);
  const ms = Math.round(p - whole * 1000);
  return ms === 0 ? `${whole}s` : `${whole}.${String(ms).padStart(3, "0")}s`;
}

/** A limit for the wire: period (or periodMs) as a Duration, the rest as is. */
function limitJSON(limit) {
  if (limit === undefined) return undefined;
  const { period, periodMs, ...rest } = limit;
  const out = { ...rest };
  const p = period ?? periodMs;
  if (p !== undefined) out.period = periodJSON(p);
  return out;
}

/** A request for the wire. */
function requestJSON(req) {
  if (req === null || typeof req !== "object") throw new TypeError("a request must be an object such as { key, policy } or { key, algorithm, limit }");
  const out = { ...req };
  if (req.limit !== undefined) out.limit = limitJSON(req.limit);
  return out;
}

const toNumber = (v) => (v === undefined || v === null ? 0 : Number(v));

/** The rate-limit headers of an answer, ready to copy to a response. */
export function rateLimitHeaders(headers) {
  const out = {};
  headers.forEach((value, name) => {
    const n = name.toLowerCase();
    if (n.startsWith("ratelimit") || n.startsWith("x-ratelimit") || n === "retry-after") out[n] = value;
  });
  return out;
}

/** A Check or Peek answer as numbers and milliseconds. */
function decision(body, headers) {
  return {
    allowed: Boolean(body.allowed),
    limit: toNumber(body.limit),
    remaining: toNumber(body.remaining),
    retryAfterMs: durationMs(body.retryAfter),
    resetAfterMs: durationMs(body.resetAfter),
    waitMs: durationMs(body.wait),
    degraded: Boolean(body.degraded),
    warning: Boolean(body.warning),
    warnAt: toNumber(body.warnAt),
    headers,
  };
}

/** The answer a failure mode gives when floodgate cannot decide. */
function failureDecision(mode, error) {
  const open = mode !== "closed";
  return {
    allowed: open,
    limit: 0,
    remaining: 0,
    retryAfterMs: open ? 0 : 1000,
    resetAfterMs: 0,
    waitMs: 0,
    degraded: true,
    warning: false,
    warnAt: 0,
    headers: open ? { "x-ratelimit-degraded": "true" } : { "x-ratelimit-degraded": "true", "retry-after": "1" },
    error,
  };
}

/**
 * A floodgate client over its HTTP/JSON API.
 *
 *   const fg = new Floodgate({ url: "http://127.0.0.1:8080" });
 *   const d = await fg.check({ key: "user:42", algorithm: "token_bucket", limit: { requests: 100, period: "1m" } });
 *   if (!d.allowed) return new Response("slow down", { status: 429, headers: d.headers });
 */
export class Floodgate {
  /**
   * @param {object} options
   * @param {string} options.url floodgate's HTTP port, e.g. "http://127.0.0.1:8080".
   * @param {string} [options.token] a bearer token (--auth-token-file).
   * @param {number} [options.timeoutMs] how long to wait for an answer; default 1000.
   * @param {"open"|"closed"} [options.failureMode] what check and checkBatch answer when floodgate cannot decide: "open" (default) allows, "closed" denies; both mark the answer degraded.
   * @param {typeof fetch} [options.fetch] the fetch to use; default globalThis.fetch.
   */
  constructor({ url, token, timeoutMs = DEFAULT_TIMEOUT_MS, failureMode = "open", fetch: fetchFn } = {}) {
    if (!url) throw new TypeError("Floodgate: url is required, e.g. http://127.0.0.1:8080");
    if (failureMode !== "open" && failureMode !== "closed") throw new TypeError(`Floodgate: failureMode must be "open" or "closed", got ${JSON.stringify(failureMode)}`);
    if (!(timeoutMs > 0)) throw new TypeError(`Floodgate: timeoutMs must be positive, got ${timeoutMs}`);
    this.url = String(url).replace(/\/+$/, "");
    this.token = token;
    this.timeoutMs = timeoutMs;
    this.failureMode = failureMode;
    this.fetch = fetchFn ?? ((...args) => globalThis.fetch(...args));
  }

  /** POSTs body to path; resolves to { body, headers } or throws FloodgateError. */
  async call(path, body, { timeoutMs = this.timeoutMs } = {}) {
    const headers = { "content-type": "application/json" };
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    let resp;
    try {
      resp = await this.fetch(this.url + path, {
        method: "POST",
        headers,
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (err) {
      const timedOut = err?.name === "TimeoutError" || err?.name === "AbortError";
      const why = [err?.message ?? String(err), err?.cause?.code ?? err?.cause?.message].filter(Boolean).join(": ");
      throw new FloodgateError(timedOut ? `floodgate did not answer within ${timeoutMs} ms` : `floodgate unreachable: ${why}`, {
        code: timedOut ? "DEADLINE_EXCEEDED" : "UNAVAILABLE",
        cause: err,
      });
    }
    const text = await resp.text();
    let json;
    try {
      json = text === "" ? {} : JSON.parse(text);
    } catch (err) {
      throw new FloodgateError(`floodgate answered ${resp.status} with no JSON (is ${this.url} floodgate's HTTP port?): ${text.slice(0, 200)}`, {
        status: resp.status,
        code: "UNKNOWN",
        unavailable: UNAVAILABLE_STATUSES.has(resp.status),
        cause: err,
      });
    }
    // A denial is a 200 by default and a 429 when the server is asked
    // for one; both are answers.
    if (resp.status === 200 || (resp.status === 429 && typeof json.allowed === "boolean")) {
      return { body: json, headers: rateLimitHeaders(resp.headers) };
    }
    throw new FloodgateError(`floodgate answered ${resp.status} ${json.code ?? ""}: ${json.message ?? text}`.trim(), {
      status: resp.status,
      code: json.code ?? "UNKNOWN",
      unavailable: UNAVAILABLE_STATUSES.has(resp.status),
    });
  }

  /** Applies the failure mode to an error of check or checkBatch. */
  failOver(err, mode) {
    if (err instanceof FloodgateError && err.unavailable) return failureDecision(mode ?? this.failureMode, err);
    throw err;
  }

  /**
   * May `key` spend `cost` now? Charges it when allowed.
   * @param {object} req { key, policy } or { key, algorithm, limit: { requests, period, burst, warnAt, warnAtPercent } }, and cost.
   * @param {object} [opts] { timeoutMs, failureMode } for this call.
   */
  async check(req, opts = {}) {
    try {
      const { body, headers } = await this.call(PATHS.check, requestJSON(req), opts);
      return decision(body, headers);
    } catch (err) {
      return this.failOver(err, opts.failureMode);
    }
  }

  /**
   * Several checks, all or nothing: allowed only if every one is, and
   * nothing is charged otherwise.
   */
  async checkBatch(checks, opts = {}) {
    if (!Array.isArray(checks)) throw new TypeError("checkBatch takes an array of checks");
    try {
      const { body, headers } = await this.call(PATHS.checkBatch, { checks: checks.map(requestJSON) }, opts);
      return { allowed: Boolean(body.allowed), results: (body.results ?? []).map((r) => decision(r, {})), degraded: (body.results ?? []).some((r) => r.degraded), headers };
    } catch (err) {
      const d = this.failOver(err, opts.failureMode);
      return { allowed: d.allowed, results: checks.map(() => d), degraded: true, headers: d.headers, error: d.error };
    }
  }

  /** What check would answer now, charging nothing. Throws FloodgateError when floodgate cannot answer. */
  async peek(req, opts = {}) {
    const { body, headers } = await this.call(PATHS.peek, requestJSON(req), opts);
    return decision(body, headers);
  }

  /**
   * Settles usage known afterwards: { key, policy | algorithm+limit,
   * reserved, actual, idempotencyKey }.
   */
  async settle(req, opts = {}) {
    const { body } = await this.call(PATHS.settle, requestJSON(req), opts);
    return {
      limit: toNumber(body.limit),
      remaining: toNumber(body.remaining),
      debt: toNumber(body.debt),
      retryAfterMs: durationMs(body.retryAfter),
      resetAfterMs: durationMs(body.resetAfter),
      unrecorded: toNumber(body.unrecorded),
      duplicate: Boolean(body.duplicate),
      degraded: Boolean(body.degraded),
    };
  }

  /** Forgets a key's counts: { key } or { key, algorithm }. Needs an admin token when tokens are on. */
  async reset(req, opts = {}) {
    await this.call(PATHS.reset, requestJSON(req), opts);
  }
}
