// The fetch client against a real floodgate.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Floodgate, FloodgateError, durationMs } from "../src/index.js";
import { URL_, uniqueKey, blackHole, deadURL } from "./helpers.js";

// Far above a decision's time, on a busy test machine too.
const fg = new Floodgate({ url: URL_, timeoutMs: 10_000 });

test("check: numbers as numbers, durations in ms, headers to copy, until a denial", async () => {
  const key = uniqueKey("check");
  const req = { key, algorithm: "token_bucket", limit: { requests: 3, period: "1m" } };
  const seen = [];
  for (let i = 0; i < 4; i++) seen.push(await fg.check(req));
  assert.deepEqual(seen.map((d) => d.allowed), [true, true, true, false]);
  assert.deepEqual(seen.map((d) => d.remaining), [2, 1, 0, 0]);
  for (const d of seen) {
    assert.equal(d.limit, 3);
    assert.equal(typeof d.resetAfterMs, "number");
    assert.equal(d.degraded, false);
  }
  const denied = seen[3];
  // An empty bucket of 3 per minute refills one token in 20 s.
  assert.ok(denied.retryAfterMs > 19_000 && denied.retryAfterMs <= 20_000, `retryAfterMs ${denied.retryAfterMs}`);
  assert.equal(denied.headers["retry-after"], "20");
  assert.equal(denied.headers["x-ratelimit-remaining"], "0");
  assert.match(denied.headers["ratelimit-policy"], /^"inline";q=3;w=60$/);
  assert.equal(seen[0].headers["retry-after"], undefined);
});

test("a period in milliseconds is the same limit as the string", async () => {
  const key = uniqueKey("period");
  const a = await fg.check({ key, algorithm: "token_bucket", cost: 2, limit: { requests: 2, period: 1500 } });
  assert.equal(a.allowed, true);
  assert.equal(a.resetAfterMs, 1500);
  const b = await fg.check({ key: uniqueKey("periodMs"), algorithm: "TOKEN_BUCKET", cost: 2, limit: { requests: 2, periodMs: 90_000 } });
  assert.equal(b.resetAfterMs, 90_000);
});

test("checkBatch: all or nothing", async () => {
  const ip = { key: uniqueKey("batch-ip"), algorithm: "fixed_window", limit: { requests: 10, period: "1h" } };
  const user = { key: uniqueKey("batch-user"), algorithm: "fixed_window", limit: { requests: 1, period: "1h" } };
  const first = await fg.checkBatch([ip, user]);
  assert.equal(first.allowed, true);
  assert.deepEqual(first.results.map((r) => r.remaining), [9, 0]);
  const second = await fg.checkBatch([ip, user]);
  assert.equal(second.allowed, false);
  assert.ok(second.headers["retry-after"]);
  // The denied batch charged neither: the IP still has 9.
  const peek = await fg.peek(ip);
  assert.equal(peek.remaining, 9);
});

test("peek charges nothing; reset forgets; settle returns numbers", async () => {
  const req = { key: uniqueKey("peek"), algorithm: "sliding_window", limit: { requests: 5, period: "10m" } };
  assert.equal((await fg.peek(req)).remaining, 5);
  assert.equal((await fg.peek(req)).remaining, 5);
  assert.equal((await fg.check({ ...req, cost: 5 })).remaining, 0);
  assert.equal((await fg.peek(req)).allowed, false);
  await fg.reset({ key: req.key, algorithm: req.algorithm });
  assert.equal((await fg.peek(req)).remaining, 5);

  const tb = { key: uniqueKey("settle"), algorithm: "token_bucket", limit: { requests: 100, period: "1h" } };
  assert.equal((await fg.check({ ...tb, cost: 10 })).remaining, 90);
  const s = await fg.settle({ ...tb, reserved: 10, actual: 30, idempotencyKey: "req-1" });
  assert.equal(s.remaining, 70);
  assert.equal(s.limit, 100);
  assert.equal(s.duplicate, false);
  const again = await fg.settle({ ...tb, reserved: 10, actual: 30, idempotencyKey: "req-1" });
  assert.equal(again.duplicate, true);
  assert.equal(again.remaining, 70);
});

test("the soft limit: warning and its header once past warnAt", async () => {
  const req = { key: uniqueKey("warn"), algorithm: "fixed_window", limit: { requests: 4, period: "1h", warnAt: 2 } };
  const a = await fg.check(req);
  assert.equal(a.warning, false);
  assert.equal(a.warnAt, 2);
  const b = await fg.check(req);
  assert.equal(b.allowed, true);
  assert.equal(b.warning, true);
  assert.match(b.headers["ratelimit-warning"], /at=2/);
});

test("errors floodgate answers are thrown, whatever the failure mode", async () => {
  await assert.rejects(fg.check({ key: uniqueKey("nopolicy"), policy: "no-such-policy" }), (err) => {
    assert.ok(err instanceof FloodgateError);
    assert.equal(err.code, "NOT_FOUND");
    assert.equal(err.status, 404);
    assert.equal(err.unavailable, false);
    return true;
  });
  await assert.rejects(fg.check({ key: "", algorithm: "token_bucket", limit: { requests: 1, period: "1m" } }), /INVALID_ARGUMENT/);
  await assert.rejects(fg.check({ key: "k", algorithm: "bucket", limit: { requests: 1, period: "1m" } }), /INVALID_ARGUMENT/);
});

test("timeouts: fail open allows, fail closed denies, both degraded", async () => {
  const hole = await blackHole();
  try {
    const req = { key: uniqueKey("timeout"), algorithm: "token_bucket", limit: { requests: 1, period: "1m" } };
    const open = await new Floodgate({ url: hole.url, timeoutMs: 100 }).check(req);
    assert.equal(open.allowed, true);
    assert.equal(open.degraded, true);
    assert.equal(open.error.code, "DEADLINE_EXCEEDED");
    assert.equal(open.headers["x-ratelimit-degraded"], "true");
    const closed = await new Floodgate({ url: hole.url, timeoutMs: 100, failureMode: "closed" }).check(req);
    assert.equal(closed.allowed, false);
    assert.equal(closed.degraded, true);
    assert.equal(closed.retryAfterMs, 1000);
    // Per call.
    const perCall = await new Floodgate({ url: hole.url, timeoutMs: 100 }).check(req, { failureMode: "closed" });
    assert.equal(perCall.allowed, false);
    // peek has no failure mode: it says floodgate did not answer.
    await assert.rejects(new Floodgate({ url: hole.url, timeoutMs: 100 }).peek(req), (err) => err.unavailable && err.code === "DEADLINE_EXCEEDED");
  } finally {
    await hole.close();
  }
  const dead = new Floodgate({ url: await deadURL(), failureMode: "closed" });
  const d = await dead.check({ key: "k", policy: "p" });
  assert.equal(d.allowed, false);
  assert.equal(d.error.code, "UNAVAILABLE");
});

test("durationMs reads protobuf JSON durations", () => {
  assert.equal(durationMs("0s"), 0);
  assert.equal(durationMs("19.993s"), 19993);
  assert.equal(durationMs("60s"), 60000);
  assert.equal(durationMs("0.000001s"), 1); // rounded up: never early
  assert.equal(durationMs(undefined), 0);
  assert.throws(() => durationMs("1m"), TypeError);
});

test("options are checked", () => {
  assert.throws(() => new Floodgate({}), /url is required/);
  assert.throws(() => new Floodgate({ url: URL_, failureMode: "maybe" }), /failureMode/);
});

test("a denial answered with HTTP 429 (?deny_status=429) is the same decision", async () => {
  const asks429 = (url, init) => fetch(`${url}?deny_status=429`, init);
  const c = new Floodgate({ url: URL_, timeoutMs: 10_000, fetch: asks429 });
  const req = { key: uniqueKey("429"), algorithm: "fixed_window", limit: { requests: 1, period: "1h" } };
  assert.equal((await c.check(req)).allowed, true);
  const denied = await c.check(req);
  assert.equal(denied.allowed, false);
  assert.equal(denied.degraded, false);
  assert.ok(denied.retryAfterMs > 0);
  assert.ok(denied.headers["retry-after"]);
  assert.equal((await c.checkBatch([req])).allowed, false);
});
