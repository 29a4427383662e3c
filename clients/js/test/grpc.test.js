// gRPC from Node: the proto (edition 2023) loaded by the oldest
// @grpc/proto-loader and protobufjs that read editions, as pinned in
// package.json's devDependencies, and Check called over @grpc/grpc-js.
// A proto change that raises these minimums fails here.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import grpc from "@grpc/grpc-js";
import protoLoader from "@grpc/proto-loader";
import { GRPC_ADDR, uniqueKey } from "./helpers.js";

const require = createRequire(import.meta.url);
const protoDir = fileURLToPath(new URL("../../../proto", import.meta.url));

/** The minimums README.md and docs/grpc-clients.md document. */
const MINIMUM = { protobufjs: "7.5.0", "@grpc/proto-loader": "0.7.0" };

test("the pinned versions are the documented minimums", () => {
  for (const [name, version] of Object.entries(MINIMUM)) {
    assert.equal(require(`${name}/package.json`).version, version, `${name} installed`);
  }
});

test("Check over gRPC with the minimum protobufjs and proto-loader", async (t) => {
  if (!GRPC_ADDR) throw new Error("FLOODGATE_GRPC_ADDR is not set");
  const def = protoLoader.loadSync("floodgate/v1/ratelimiter.proto", {
    includeDirs: [protoDir],
    longs: Number,
    enums: String,
    defaults: true,
  });
  const { floodgate } = grpc.loadPackageDefinition(def);
  const client = new floodgate.v1.RateLimiter(GRPC_ADDR, grpc.credentials.createInsecure());
  t.after(() => client.close());
  const check = (req) =>
    new Promise((resolve, reject) =>
      client.Check(req, { deadline: Date.now() + 5000 }, (err, resp) => (err ? reject(err) : resolve(resp))),
    );
  const req = {
    key: uniqueKey("grpc"),
    algorithm: "ALGORITHM_TOKEN_BUCKET",
    limit: { requests: 2, period: { seconds: 60 } },
  };
  const answers = [await check(req), await check(req), await check(req)];
  assert.deepEqual(answers.map((a) => a.allowed), [true, true, false]);
  assert.equal(answers[0].limit, 2);
  assert.equal(answers[0].remaining, 1);
  // An empty bucket of 2 a minute refills one token in 30 s.
  const waitMs = answers[2].retryAfter.seconds * 1000 + answers[2].retryAfter.nanos / 1e6;
  assert.ok(waitMs > 29_000 && waitMs <= 30_000, `retryAfter ${waitMs} ms`);
  // A bad request is INVALID_ARGUMENT, naming the field.
  await assert.rejects(check({ key: "", algorithm: "ALGORITHM_TOKEN_BUCKET", limit: { requests: 1, period: { seconds: 1 } } }), (err) => {
    assert.equal(err.code, grpc.status.INVALID_ARGUMENT);
    assert.match(err.details, /key/);
    return true;
  });
});
