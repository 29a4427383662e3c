// The same client under Bun and Deno (both from the npm registry, pinned
// in package.json's devDependencies), against the real floodgate.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { URL_, uniqueKey } from "./helpers.js";

const run = promisify(execFile);
const bin = (name) => fileURLToPath(new URL(`../node_modules/.bin/${name}`, import.meta.url));
const script = fileURLToPath(new URL("./runtimes/check.js", import.meta.url));

const runtimes = {
  bun: [bin("bun"), ["run", script]],
  deno: [bin("deno"), ["run", "--no-config", "--allow-net=127.0.0.1", "--allow-env=FLOODGATE_URL,CHECK_KEY", script]],
};

for (const [name, [cmd, args]] of Object.entries(runtimes)) {
  test(`the client under ${name}`, async () => {
    const { stdout } = await run(cmd, args, { env: { ...process.env, FLOODGATE_URL: URL_, CHECK_KEY: uniqueKey(name), NO_COLOR: "1", DENO_NO_UPDATE_CHECK: "1" } });
    const seen = JSON.parse(stdout.trim().split("\n").pop());
    assert.deepEqual(seen.map((d) => [d.allowed, d.remaining, d.header]), [[true, 1, "1"], [true, 0, "0"], [false, 0, "0"]]);
    assert.ok(seen[2].retryAfterMs > 29_000 && seen[2].retryAfterMs <= 30_000, `retryAfterMs ${seen[2].retryAfterMs}`);
  });
}
