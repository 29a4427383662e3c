// An Express/Connect middleware: every request limited by its client IP
// and, when it carries an API key, by the key too, in one all-or-nothing
// batch (a deny on either charges neither), as floodgate's Go httplimit.
import { Floodgate, FloodgateError } from "./index.js";

/** The header that carries an API key, unless options.apiKeyHeader says otherwise. */
export const DEFAULT_API_KEY_HEADER = "x-api-key";

/** How many leading bits of an IPv6 address key it: one /64, a customer's usual share. */
export const DEFAULT_IPV6_PREFIX = 64;

/** The key of an IPv6 address: its first prefix bits, as hex groups. */
function ipv6Key(addr, prefix) {
  let [head, tail = ""] = addr.split("::");
  if (!addr.includes("::")) tail = "";
  const h = head ? head.split(":") : [];
  const t = tail ? tail.split(":") : [];
  const groups = [...h, ...Array(Math.max(0, 8 - h.length - t.length)).fill("0"), ...t].map((g) => parseInt(g || "0", 16));
  const out = [];
  for (let i = 0; i < 8; i++) {
    const bits = Math.min(16, Math.max(0, prefix - i * 16));
    out.push(bits === 0 ? 0 : groups[i] & (0xffff << (16 - bits)) & 0xffff);
  }
  return `${out.map((g) => g.toString(16)).join(":")}/${prefix}`;
}

/** The client address of req: the socket's, or the n-th from the right of X-Forwarded-For behind n trusted proxies. */
export function clientIP(req, { trustedProxyHops = 0, ipv6Prefix = DEFAULT_IPV6_PREFIX } = {}) {
  let ip = req.socket?.remoteAddress ?? req.connection?.remoteAddress ?? "";
  if (trustedProxyHops > 0) {
    const hops = String(req.headers?.["x-forwarded-for"] ?? "").split(",").map((s) => s.trim()).filter(Boolean);
    if (hops.length >= trustedProxyHops) ip = hops[hops.length - trustedProxyHops];
  }
  if (ip.startsWith("::ffff:") && ip.includes(".")) ip = ip.slice(7); // IPv4 on a dual-stack socket
  if (ip.includes(":")) return ipv6Key(ip.split("%")[0], ipv6Prefix);
  return ip || "unknown";
}

/**
 * rateLimit returns the middleware.
 *
 *   app.use(rateLimit({ floodgate: { url: "http://127.0.0.1:8080" }, limit: { algorithm: "token_bucket", limit: { requests: 100, period: "1m" } } }));
 *
 * options:
 * - floodgate: a Floodgate, or the options to make one ({ url, token, timeoutMs }).
 * - limit: the limit of an API key (and of an IP unless ipLimit is set):
 *   { policy } or { algorithm, limit: { requests, period, burst } }.
 * - ipLimit: the limit of a client IP; default limit.
 * - apiKeyHeader: default "x-api-key". A missing or blank key is no key.
 * - verifyApiKey(req, key): true when the key is genuine; then the key
 *   alone limits (unless perIpAndKey), and a rejected key counts as none.
 *   Without it a keyed request is limited by its IP and its key at once.
 * - perIpAndKey: limit verified keys by IP too.
 * - trustedProxyHops, ipv6Prefix: how the client IP is found (clientIP).
 * - keyPrefix: put before every key, e.g. "api:".
 * - failureMode: "open" (default: the request goes through) or "closed"
 *   (503) when floodgate cannot decide; a configuration error (bad token,
 *   unknown policy) is a 500 either way.
 * - onError(err, req): told of every error from floodgate.
 */
export function rateLimit(options = {}) {
  const {
    limit,
    ipLimit = limit,
    apiKeyHeader = DEFAULT_API_KEY_HEADER,
    verifyApiKey,
    perIpAndKey = false,
    trustedProxyHops = 0,
    ipv6Prefix = DEFAULT_IPV6_PREFIX,
    keyPrefix = "",
    failureMode = "open",
    onError,
  } = options;
  if (!limit) throw new TypeError("rateLimit: limit is required: { policy } or { algorithm, limit: { requests, period } }");
  if (failureMode !== "open" && failureMode !== "closed") throw new TypeError(`rateLimit: failureMode must be "open" or "closed", got ${JSON.stringify(failureMode)}`);
  const fg = options.floodgate instanceof Floodgate ? options.floodgate : new Floodgate({ ...options.floodgate, failureMode });
  const headerName = apiKeyHeader.toLowerCase();

  return async function floodgateRateLimit(req, res, next) {
    try {
      const ip = clientIP(req, { trustedProxyHops, ipv6Prefix });
      let apiKey = String(req.headers?.[headerName] ?? "").trim();
      let verified = false;
      if (apiKey && verifyApiKey) {
        verified = Boolean(await verifyApiKey(req, apiKey));
        if (!verified) apiKey = "";
      }
      const checks = [];
      if (!apiKey || !verified || perIpAndKey) checks.push({ key: `${keyPrefix}ip:${ip}`, ...ipLimit });
      if (apiKey) checks.push({ key: `${keyPrefix}apikey:${apiKey}`, ...limit });

      const d = await fg.checkBatch(checks, { failureMode });
      if (d.error) onError?.(d.error, req);
      for (const [name, value] of Object.entries(d.headers)) res.setHeader(name, value);
      if (!d.allowed) {
        if (d.degraded && d.error) {
          res.statusCode = 503;
          res.setHeader("content-type", "application/json");
          res.end(JSON.stringify({ error: "rate_limiter_unavailable" }));
          return;
        }
        res.statusCode = 429;
        res.setHeader("content-type", "application/json");
        const wait = Math.max(...d.results.map((r) => r.retryAfterMs));
        res.end(JSON.stringify({ error: "rate_limit_exceeded", retry_after_ms: wait }));
        return;
      }
      next();
    } catch (err) {
      onError?.(err, req);
      if (err instanceof FloodgateError) {
        // A configuration error: no outage explains it, and failing open
        // would hide it.
        res.statusCode = 500;
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify({ error: "rate_limiter_misconfigured" }));
        return;
      }
      next(err);
    }
  };
}
