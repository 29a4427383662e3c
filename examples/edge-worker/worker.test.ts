// Tests of the edge worker against a real floodgate, under Node's own test
// runner, compiled with the worker by tsc:
//
//	npm ci && npx tsc -p . && FLOODGATE_BIN=/path/to/floodgate node --test dist/worker.test.js
//
// starts that binary on free loopback ports with a token file, and a small
// origin server; `go test -run TestEdgeWorkerExample ./e2e/` does so with
// the binary it builds.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { createServer, type Server } from "node:http";
import { createServer as createTCPServer, type AddressInfo, type Server as TCPServer } from "node:net";
import { mkdtempSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { once } from "node:events";
import readline from "node:readline";

import worker from "./worker.js";
import type { Env } from "./routes.js";

const TOKEN = "edge-worker-test-token-4Fq9";
const bin = process.env.FLOODGATE_BIN;

let floodgate: ChildProcess | undefined;
let floodgateURL = "";
let originURL = "";
let origin: Server | undefined;
let blackHole: TCPServer | undefined; // accepts connections and never answers
let blackHoleURL = "";
let dir = "";

before(async () => {
  assert.ok(bin, "set FLOODGATE_BIN to a floodgate binary (go build -o /tmp/floodgate ./cmd/floodgate)");
  dir = mkdtempSync(join(tmpdir(), "edge-worker-"));
  const tokens = join(dir, "tokens");
  writeFileSync(tokens, TOKEN + "\n");
  const fg = spawn(bin, ["serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--log-format", "json", "--auth-token-file", tokens], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  floodgate = fg;
  const lines = readline.createInterface({ input: fg.stderr });
  floodgateURL = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("floodgate did not start in 30s")), 30_000);
    fg.once("exit", (code) => reject(new Error(`floodgate exited with ${code}`)));
    lines.on("line", (line) => {
      try {
        const rec = JSON.parse(line) as { msg?: string; http?: string };
        if (rec.msg === "serving") {
          clearTimeout(timer);
          resolve("http://" + rec.http);
        }
      } catch {
        // not JSON: ignore
      }
    });
  });

  const o = createServer((req, res) => {
    res.setHeader("content-type", "text/plain");
    res.end(`origin saw ${req.method} ${req.url}`);
  });
  origin = o;
  o.listen(0, "127.0.0.1");
  await once(o, "listening");
  originURL = `http://127.0.0.1:${(o.address() as AddressInfo).port}`;

  const bh = createTCPServer(() => {});
  blackHole = bh;
  bh.listen(0, "127.0.0.1");
  await once(bh, "listening");
  blackHoleURL = `http://127.0.0.1:${(bh.address() as AddressInfo).port}`;
});

after(async () => {
  if (floodgate && floodgate.exitCode === null) {
    floodgate.kill("SIGTERM");
    await once(floodgate, "exit");
  }
  origin?.close();
  origin?.closeAllConnections();
  blackHole?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function env(overrides: Partial<Env> = {}): Env {
  // A timeout far above a decision's time on a busy test machine; the
  // "too slow" case sets its own.
  return { FLOODGATE_URL: floodgateURL, FLOODGATE_TOKEN: TOKEN, FLOODGATE_TIMEOUT_MS: "5000", ORIGIN_URL: originURL, ...overrides };
}

/** A request as Cloudflare hands it to the Worker. */
function request(path: string, headers: Record<string, string> = {}, method = "GET"): Request {
  return new Request("https://edge.example" + path, { method, headers: { "cf-connecting-ip": "203.0.113.7", ...headers } });
}

test("an unlimited route goes to the origin without asking floodgate", async () => {
  // floodgate's URL is a black hole: were it asked, the answer would be slow.
  const resp = await worker.fetch(request("/static/app.js"), env({ FLOODGATE_URL: blackHoleURL }));
  assert.equal(resp.status, 200);
  assert.equal(await resp.text(), "origin saw GET /static/app.js");
  assert.equal(resp.headers.get("ratelimit"), null);
});

test("an allowed API call reaches the origin with floodgate's headers", async () => {
  const resp = await worker.fetch(request("/api/orders?page=2", { "x-api-key": "k-allowed" }), env());
  assert.equal(resp.status, 200);
  assert.equal(await resp.text(), "origin saw GET /api/orders?page=2");
  // 100/min, burst 20: q is the burst, w the 12s the burst takes to refill.
  assert.equal(resp.headers.get("ratelimit-policy"), '"inline";q=20;w=12');
  assert.equal(resp.headers.get("x-ratelimit-remaining"), "19");
  assert.equal(resp.headers.get("retry-after"), null);
});

test("login: five tries per 15 minutes, then 429 with Retry-After", async () => {
  for (let i = 1; i <= 5; i++) {
    const resp = await worker.fetch(request("/login", { "cf-connecting-ip": "198.51.100.5" }, "POST"), env());
    assert.equal(resp.status, 200, `try ${i}`);
    assert.equal(resp.headers.get("x-ratelimit-remaining"), String(5 - i));
    await resp.arrayBuffer();
  }
  const denied = await worker.fetch(request("/login", { "cf-connecting-ip": "198.51.100.5" }, "POST"), env());
  assert.equal(denied.status, 429);
  const body = (await denied.json()) as { error: string; retry_after_seconds: number };
  assert.equal(body.error, "rate_limit_exceeded");
  const retry = Number(denied.headers.get("retry-after"));
  assert.ok(retry >= 1 && retry <= 1800, `Retry-After ${retry}`);
  assert.equal(body.retry_after_seconds, retry);
  assert.equal(denied.headers.get("ratelimit-policy"), '"inline";q=5;w=900');

  // Another address has its own limit.
  const other = await worker.fetch(request("/login", { "cf-connecting-ip": "198.51.100.6" }, "POST"), env());
  assert.equal(other.status, 200);
  await other.arrayBuffer();
});

test("API keys are limited apart, and never sent to floodgate as they are", async () => {
  const sent: string[] = [];
  const realFetch = globalThis.fetch;
  globalThis.fetch = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    if (String(input).startsWith(floodgateURL)) sent.push(String(init?.body));
    return realFetch(input, init);
  };
  try {
    const a = await worker.fetch(request("/api/x", { "x-api-key": "secret-a" }), env());
    const b = await worker.fetch(request("/api/x", { "x-api-key": "secret-b" }), env());
    assert.equal(a.headers.get("x-ratelimit-remaining"), "19");
    assert.equal(b.headers.get("x-ratelimit-remaining"), "19");
    await Promise.all([a.arrayBuffer(), b.arrayBuffer()]);
  } finally {
    globalThis.fetch = realFetch;
  }
  assert.equal(sent.length, 2);
  for (const body of sent) {
    assert.match((JSON.parse(body) as { key: string }).key, /^api:key:[0-9a-f]{32}$/);
    assert.ok(!body.includes("secret-"), body);
  }
});

const outages: [string, Partial<Env>][] = [
  ["unreachable", { FLOODGATE_URL: "http://127.0.0.1:1" }],
  ["too slow", { FLOODGATE_URL: "", FLOODGATE_TIMEOUT_MS: "200" }], // the black hole, set below
];
for (const [why, overrides] of outages) {
  test(`floodgate ${why}: login fails closed, the API fails open`, async () => {
    const e = env(overrides);
    if (e.FLOODGATE_URL === "") e.FLOODGATE_URL = blackHoleURL;
    const start = Date.now();
    const login = await worker.fetch(request("/login", { "cf-connecting-ip": "192.0.2.1" }, "POST"), e);
    assert.equal(login.status, 503);
    assert.equal(login.headers.get("retry-after"), "1");
    assert.deepEqual(await login.json(), { error: "rate_limiter_unavailable" });

    const api = await worker.fetch(request("/api/x", { "x-api-key": "k-down" }), e);
    assert.equal(api.status, 200);
    assert.equal(await api.text(), "origin saw GET /api/x");
    assert.equal(api.headers.get("x-ratelimit-degraded"), "true");
    assert.ok(Date.now() - start < 5000, "the failure mode answered within the timeouts");
  });
}

test("floodgate refusing the token: a misconfiguration, 500 on every limited route", async () => {
  const e = env({ FLOODGATE_TOKEN: "not-a-token" });
  for (const path of ["/login", "/api/x"]) {
    const resp = await worker.fetch(request(path, { "cf-connecting-ip": "192.0.2.2" }, "POST"), e);
    assert.equal(resp.status, 500, path);
    assert.deepEqual(await resp.json(), { error: "rate_limiter_misconfigured" });
  }
});
