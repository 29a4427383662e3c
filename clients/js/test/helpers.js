// What the tests share: floodgate's addresses from the environment (the
// Go test e2e/jsclient_test.go starts the binary and sets them), and
// unique keys so that tests never share a count.
import net from "node:net";

/** floodgate's HTTP port, e.g. http://127.0.0.1:8080. */
export const URL_ = process.env.FLOODGATE_URL;
/** floodgate's gRPC address, e.g. 127.0.0.1:8081. */
export const GRPC_ADDR = process.env.FLOODGATE_GRPC_ADDR;

if (!URL_) {
  throw new Error("FLOODGATE_URL is not set: run these tests with `go test -run TestJSClient ./e2e`, or start `floodgate serve` and set FLOODGATE_URL=http://127.0.0.1:8080 (and FLOODGATE_GRPC_ADDR=127.0.0.1:8081)");
}

let n = 0;
/** A key no other test uses. */
export function uniqueKey(name) {
  n++;
  return `js-test:${name}:${process.pid}:${Date.now()}:${n}`;
}

/**
 * A TCP server on loopback that accepts connections and never answers,
 * for timeouts; close() stops it.
 */
export async function blackHole() {
  const sockets = new Set();
  const srv = net.createServer((s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise((resolve) => srv.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${srv.address().port}`,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((resolve) => srv.close(resolve));
    },
  };
}

/** A loopback URL nothing listens on. */
export async function deadURL() {
  const srv = net.createServer();
  await new Promise((resolve) => srv.listen(0, "127.0.0.1", resolve));
  const port = srv.address().port;
  await new Promise((resolve) => srv.close(resolve));
  return `http://127.0.0.1:${port}`;
}
