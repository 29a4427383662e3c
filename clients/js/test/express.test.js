// The Express middleware in a real Express app, against a real floodgate.
import { test } from "node:test";
import assert from "node:assert/strict";
import express from "express";
import { rateLimit, clientIP } from "../src/express.js";
import { Floodgate } from "../src/index.js";
import { URL_, uniqueKey, deadURL } from "./helpers.js";

/** Serves app on loopback; resolves to its base URL and a close function. */
async function listen(app) {
  const server = await new Promise((resolve) => {
    const s = app.listen(0, "127.0.0.1", () => resolve(s));
  });
  return { base: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((r) => server.close(r)) };
}

function appWith(options) {
  const app = express();
  app.use(rateLimit(options));
  app.get("/", (_req, res) => res.send("hello"));
  return app;
}

test("keyed by API key and IP: requests until a 429, headers on every answer", async () => {
  const prefix = uniqueKey("express") + ":";
  const app = appWith({
    floodgate: { url: URL_, timeoutMs: 10_000 },
    keyPrefix: prefix,
    limit: { algorithm: "token_bucket", limit: { requests: 3, period: "1m" } },
    ipLimit: { algorithm: "token_bucket", limit: { requests: 100, period: "1m" } },
  });
  const { base, close } = await listen(app);
  try {
    const statuses = [];
    let last;
    for (let i = 0; i < 10 && !statuses.includes(429); i++) {
      last = await fetch(base, { headers: { "x-api-key": "alice" } });
      statuses.push(last.status);
      if (last.status === 200) {
        assert.equal(await last.text(), "hello");
        assert.ok(last.headers.get("x-ratelimit-remaining") !== null);
      }
    }
    assert.deepEqual(statuses, [200, 200, 200, 429]);
    assert.equal(last.headers.get("retry-after"), "20");
    assert.deepEqual(Object.keys(await last.json()), ["error", "retry_after_ms"]);
    // Another key has its own limit; the IP's (100) is not spent.
    assert.equal((await fetch(base, { headers: { "x-api-key": "bob" } })).status, 200);
    // No key: the IP's limit alone.
    assert.equal((await fetch(base)).status, 200);
  } finally {
    await close();
  }
});

test("a verified key alone limits; a rejected key counts as none", async () => {
  const prefix = uniqueKey("verify") + ":";
  const app = appWith({
    floodgate: new Floodgate({ url: URL_, timeoutMs: 10_000 }),
    keyPrefix: prefix,
    verifyApiKey: async (_req, key) => key === "good",
    limit: { algorithm: "fixed_window", limit: { requests: 5, period: "1h" } },
    ipLimit: { algorithm: "fixed_window", limit: { requests: 1, period: "1h" } },
  });
  const { base, close } = await listen(app);
  try {
    assert.equal((await fetch(base, { headers: { "x-api-key": "forged" } })).status, 200); // the IP's one
    assert.equal((await fetch(base, { headers: { "x-api-key": "forged-2" } })).status, 429); // still the IP
    assert.equal((await fetch(base, { headers: { "x-api-key": "good" } })).status, 200); // the key's own 5
  } finally {
    await close();
  }
});

test("floodgate unreachable: fail open lets requests through, fail closed answers 503", async () => {
  const url = await deadURL();
  const limit = { algorithm: "token_bucket", limit: { requests: 1, period: "1m" } };
  const errors = [];
  const open = await listen(appWith({ floodgate: { url, timeoutMs: 200 }, limit, onError: (e) => errors.push(e) }));
  const closed = await listen(appWith({ floodgate: { url, timeoutMs: 200 }, limit, failureMode: "closed" }));
  try {
    const a = await fetch(open.base);
    assert.equal(a.status, 200);
    assert.equal(a.headers.get("x-ratelimit-degraded"), "true");
    assert.equal(errors.length, 1);
    const b = await fetch(closed.base);
    assert.equal(b.status, 503);
    assert.equal(b.headers.get("retry-after"), "1");
  } finally {
    await open.close();
    await closed.close();
  }
});

test("a misconfiguration (unknown policy) is a 500 even when failing open", async () => {
  const { base, close } = await listen(appWith({ floodgate: { url: URL_, timeoutMs: 10_000 }, limit: { policy: "no-such-policy" } }));
  try {
    const r = await fetch(base);
    assert.equal(r.status, 500);
    assert.deepEqual(await r.json(), { error: "rate_limiter_misconfigured" });
  } finally {
    await close();
  }
});

test("clientIP: socket address, trusted proxies, IPv6 by /64", () => {
  const req = (remoteAddress, xff) => ({ socket: { remoteAddress }, headers: xff ? { "x-forwarded-for": xff } : {} });
  assert.equal(clientIP(req("127.0.0.1")), "127.0.0.1");
  assert.equal(clientIP(req("::ffff:10.0.0.1")), "10.0.0.1");
  assert.equal(clientIP(req("10.0.0.9", "1.2.3.4, 5.6.7.8")), "10.0.0.9"); // no trusted proxies: the header is ignored
  assert.equal(clientIP(req("10.0.0.9", "1.2.3.4, 5.6.7.8"), { trustedProxyHops: 1 }), "5.6.7.8");
  assert.equal(clientIP(req("2001:db8:1:2:3:4:5:6")), "2001:db8:1:2:0:0:0:0/64");
  assert.equal(clientIP(req("2001:db8::1")), "2001:db8:0:0:0:0:0:0/64");
  assert.equal(clientIP(req("2001:db8::1"), { ipv6Prefix: 128 }), "2001:db8:0:0:0:0:0:1/128");
});
