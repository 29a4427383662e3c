// `npm pack` makes a tarball that a fresh Node project installs and uses
// for an Express limit in a few lines.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { Floodgate } from "../src/index.js";
import { URL_ } from "./helpers.js";

const run = promisify(execFile);
const pkgDir = fileURLToPath(new URL("..", import.meta.url));
const npm = process.platform === "win32" ? "npm.cmd" : "npm";

// The whole app a user writes: 6 lines.
const APP = `import express from "express";
import { rateLimit } from "@floodgate/client/express";
const app = express();
app.use(rateLimit({ floodgate: { url: process.env.FLOODGATE_URL }, limit: { algorithm: "token_bucket", limit: { requests: 2, period: "1m" } } }));
app.get("/", (req, res) => res.send("hello"));
const server = app.listen(0, "127.0.0.1", () => console.log(server.address().port));
`;

test("npm pack, install in a fresh project, an Express limit in 6 lines", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "floodgate-pack-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const { stdout } = await run(npm, ["pack", "--json", "--pack-destination", dir], { cwd: pkgDir });
  const [packed] = JSON.parse(stdout);
  const files = packed.files.map((f) => f.path).sort();
  assert.deepEqual(files, ["README.md", "package.json", "src/express.d.ts", "src/express.js", "src/index.d.ts", "src/index.js", "src/worker.d.ts", "src/worker.js"]);

  const app = join(dir, "app");
  await run("mkdir", ["-p", app]);
  await writeFile(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
  // express from the cache the package's own devDependencies filled.
  await run(npm, ["install", "--no-audit", "--no-fund", "--prefer-offline", join(dir, packed.filename), "express@5.3.0"], { cwd: app });
  assert.deepEqual(await readdir(join(app, "node_modules", "@floodgate", "client", "src")), ["express.d.ts", "express.js", "index.d.ts", "index.js", "worker.d.ts", "worker.js"]);
  assert.ok(APP.trimEnd().split("\n").length <= 10);
  await writeFile(join(app, "app.mjs"), APP);

  const child = spawn(process.execPath, ["app.mjs"], { cwd: app, env: { ...process.env, FLOODGATE_URL: URL_ }, stdio: ["ignore", "pipe", "inherit"] });
  t.after(() => child.kill());
  const port = await new Promise((resolve, reject) => {
    child.stdout.once("data", (b) => resolve(String(b).trim()));
    child.once("exit", (code) => reject(new Error(`the app exited with ${code}`)));
  });
  // The app keys by IP alone (no API key): start from a fresh count.
  await new Floodgate({ url: URL_ }).reset({ key: "ip:127.0.0.1", algorithm: "token_bucket" });
  const statuses = [];
  for (let i = 0; i < 3; i++) statuses.push((await fetch(`http://127.0.0.1:${port}/`)).status);
  assert.deepEqual(statuses, [200, 200, 429]);
});
