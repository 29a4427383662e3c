// Run by runtimes.test.js under Bun and Deno: the package's client as
// those runtimes load it, three checks of a 2-per-minute limit, printed
// as JSON. Web APIs only, as the package itself.
import { Floodgate } from "../../src/index.js";

const env = (name) => (globalThis.Deno ? globalThis.Deno.env.get(name) : globalThis.process.env[name]);
const fg = new Floodgate({ url: env("FLOODGATE_URL"), timeoutMs: 10_000 });
const seen = [];
for (let i = 0; i < 3; i++) {
  const d = await fg.check({ key: env("CHECK_KEY"), algorithm: "token_bucket", limit: { requests: 2, period: "1m" } });
  seen.push({ allowed: d.allowed, remaining: d.remaining, retryAfterMs: d.retryAfterMs, header: d.headers["x-ratelimit-remaining"] });
}
console.log(JSON.stringify(seen));
