package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// More of the HTTP/JSON API: time limits, headers, CORS,
// metrics, the README's curl commands and the edge worker example.

// TestHTTPAPISlowBody: a body that stops coming is answered 408 within
// --unary-timeout, like a gRPC call whose message never comes; the
// connection does not stay held.
func TestHTTPAPISlowBody(t *testing.T) {
	p := startServe(t, "--unary-timeout", "500ms")
	conn, err := net.Dial("tcp", p.HTTPAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	fmt.Fprintf(conn, "POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"key\":")
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, _ := io.ReadAll(conn)
	took := time.Since(start)
	if !bytes.HasPrefix(b, []byte("HTTP/1.1 408")) || !bytes.Contains(b, []byte(`"DEADLINE_EXCEEDED"`)) {
		t.Errorf("a stalled body got %q, want 408 DEADLINE_EXCEEDED", b)
	}
	if took > 5*time.Second {
		t.Errorf("answered after %v, want about the 500ms timeout", took)
	}
}

// TestHTTPAPIHeaders: allowed and denied answers carry the RateLimit,
// RateLimit-Policy and X-RateLimit-* headers of their limit (a policy by
// its name and quota, an inline limit as "inline"), Retry-After on a
// denial only; a batch's headers describe its denied check. On both
// stores.
func TestHTTPAPIHeaders(t *testing.T) {
	for _, b := range httpAPIBackends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			p := startHTTPAPI(t, b.start)
			check := func(body string) httpAnswer { return post(t, p, "/v1/check", httpUserToken, body) }
			login := `{"key":"hdr","policy":"login"}`
			steps := []struct {
				name string
				a    httpAnswer
				want map[string]string
			}{
				{"login 1 of 3", check(login), map[string]string{
					"RateLimit-Policy":  `"login";q=3;w=900`,
					"X-RateLimit-Limit": "3, 3;w=900", "X-RateLimit-Remaining": "2", "Retry-After": ""}},
				{"login 2 of 3", check(login), map[string]string{"X-RateLimit-Remaining": "1", "Retry-After": ""}},
				{"login 3 of 3", check(login), map[string]string{"X-RateLimit-Remaining": "0", "Retry-After": ""}},
				{"login denied", check(login), map[string]string{
					"RateLimit-Policy": `"login";q=3;w=900`, "X-RateLimit-Remaining": "0", "Retry-After": "?"}},
				// 60/min burst 4: q is the burst, w the 4s it takes to refill.
				{"api token bucket", check(`{"key":"hdr","policy":"api","cost":4}`), map[string]string{
					"RateLimit-Policy": `"api";q=4;w=4`, "RateLimit": `"api";r=0;t=4`, "Retry-After": ""}},
				{"inline", check(`{"key":"hdr","algorithm":"ALGORITHM_FIXED_WINDOW","limit":{"requests":10,"period":"3600s"}}`), map[string]string{
					"RateLimit-Policy": `"inline";q=10;w=3600`, "X-RateLimit-Remaining": "9", "Retry-After": ""}},
				{"batch denied by login", post(t, p, "/v1/check:batch", httpUserToken, `{"checks":[{"key":"other","policy":"api"},`+login+`]}`), map[string]string{
					"RateLimit-Policy": `"login";q=3;w=900`, "Retry-After": "?"}},
				{"peek", post(t, p, "/v1/peek", httpUserToken, `{"key":"fresh","policy":"login"}`), map[string]string{
					"RateLimit": `"login";r=3;t=0`, "Retry-After": ""}},
			}
			for _, s := range steps {
				if s.a.status != 200 {
					t.Errorf("%s: %d %s, want 200", s.name, s.a.status, s.a.body)
					continue
				}
				for k, v := range s.want {
					// "?": present, whatever its value (a sliding
					// window's wait depends on where in its window the
					// test runs).
					if got := s.a.header.Get(k); got != v && (v != "?" || got == "") {
						t.Errorf("%s: %s %q, want %q", s.name, k, got, v)
					}
				}
			}
			if !bytes.Contains(steps[3].a.body, []byte(`"allowed":false`)) {
				t.Errorf("a denial's body %s, want \"allowed\":false", steps[3].a.body)
			}
		})
	}
}

// TestHTTPAPICORS: CORS is off by default (no Access-Control-* header, a
// preflight is refused); --http-cors-origins approves its origins only.
func TestHTTPAPICORS(t *testing.T) {
	preflight := func(p *proc, origin string) httpAnswer {
		req, _ := http.NewRequest(http.MethodOptions, "http://"+p.HTTPAddr+"/v1/check", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
		return do(t, req)
	}
	off := startServe(t)
	if a := preflight(off, "https://app.example"); a.header.Get("Access-Control-Allow-Origin") != "" || a.status < 400 {
		t.Errorf("CORS off: preflight answered %d with %v, want a refusal", a.status, a.header)
	}
	on := startServe(t, "--http-cors-origins", "https://app.example, https://admin.example")
	a := preflight(on, "https://app.example")
	if a.status != 204 || a.header.Get("Access-Control-Allow-Origin") != "https://app.example" ||
		!strings.Contains(a.header.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Errorf("allowed origin: preflight %d %v", a.status, a.header)
	}
	if a := preflight(on, "https://evil.example"); a.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("other origin: preflight approved: %v", a.header)
	}
	r := postWith(t, on, "/v1/check", `{"key":"c","algorithm":"ALGORITHM_TOKEN_BUCKET","limit":{"requests":1,"period":"1s"}}`,
		map[string]string{"Content-Type": "application/json", "Origin": "https://admin.example"})
	if r.header.Get("Access-Control-Allow-Origin") != "https://admin.example" || !strings.Contains(r.header.Get("Access-Control-Expose-Headers"), "Retry-After") {
		t.Errorf("allowed origin's answer: %v", r.header)
	}
}

// TestHTTPAPIMetrics: the HTTP API's decisions are counted apart from
// gRPC's (api="http"), and its requests by route and status; both doors
// share the key's count.
func TestHTTPAPIMetrics(t *testing.T) {
	p := startServe(t)
	body := `{"key":"m","algorithm":"ALGORITHM_TOKEN_BUCKET","limit":{"requests":1,"period":"3600s"}}`
	post(t, p, "/v1/check", "", body)
	post(t, p, "/v1/check", "", body)
	post(t, p, "/v1/check", "", `{`)
	if _, err := p.Client(t).Check(context.Background(), inlineTB("m", 1, 1)); err != nil {
		t.Fatal(err)
	}
	_, metrics := httpGet(t, p, "/metrics")
	for _, want := range []string{
		`floodgate_decisions_total{algorithm="token_bucket",api="http",domain="",result="allowed",rule="inline"} 1`,
		`floodgate_decisions_total{algorithm="token_bucket",api="http",domain="",result="denied",rule="inline"} 1`,
		// One key, one count, whichever door: gRPC finds it spent.
		`floodgate_decisions_total{algorithm="token_bucket",api="check",domain="",result="denied",rule="inline"} 1`,
		`floodgate_http_requests_total{code="200",route="check"} 2`,
		`floodgate_http_requests_total{code="400",route="check"} 1`,
		`floodgate_http_request_duration_seconds_count{route="check"} 3`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestHTTPAPIOff: --http-api=false leaves /v1/ out.
func TestHTTPAPIOff(t *testing.T) {
	p := startServe(t, "--http-api=false")
	if a := post(t, p, "/v1/check", "", `{}`); a.status != 404 {
		t.Errorf("with --http-api=false: %d %s, want 404", a.status, a.body)
	}
}

// TestEdgeWorkerExample type-checks and compiles examples/edge-worker
// (TypeScript, with the tsc that its package-lock.json pins: `npm ci`
// unless node_modules or the user's cache holds the install of the same
// lockfile (npmCI), then `npx tsc -p .` unless the user's cache holds
// the output of a compile of the very same inputs (tscInputs); a type
// error fails the test) and runs its tests (`node --test dist/worker.test.js`) against this
// floodgate binary. Without Node.js 18 or later and npm it is skipped,
// unless CI is set: CI must run it (scripts/ensure-test-deps.sh installs nodejs
// and npm). A failed install fails it either way.
func TestEdgeWorkerExample(t *testing.T) {
	node, major, npm, npx, err := findNode()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set and %v: install Node.js 18 or later and npm (scripts/ensure-test-deps.sh installs nodejs and npm)", err)
		}
		t.Skipf("skipping the edge worker example's test: %v (install Node.js 18 or later and npm, or run scripts/ensure-test-deps.sh)", err)
	}
	dir, err := filepath.Abs("../examples/edge-worker")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run := func(name string, env []string, args ...string) []byte {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		t.Logf("%s %s:\n%s", filepath.Base(name), strings.Join(args, " "), out)
		if err != nil {
			t.Fatalf("%s %s in examples/edge-worker: %v", filepath.Base(name), strings.Join(args, " "), err)
		}
		return out
	}

	// The lockfile's typescript, @types/node and wrangler, from the npm
	// registry, and @floodgate/client from clients/js.
	npmCI(ctx, t, npm, dir)
	// A stale dist/ must not stand in for a failed compile.
	dist := filepath.Join(dir, "dist")
	if err := os.RemoveAll(dist); err != nil {
		t.Fatal(err)
	}
	var cached string // the cache's folder for this compile; "" without a cache
	if base, err := os.UserCacheDir(); err == nil {
		cached = filepath.Join(base, "floodgate-e2e", "tsc", filepath.Base(dir)+"-"+tscInputs(t, dir)[:16])
	}
	hit := false
	if cached != "" {
		out, err := exec.CommandContext(ctx, "cp", "-a", filepath.Join(cached, "dist"), dist).CombinedOutput()
		if hit = err == nil; hit {
			t.Logf("tsc -p .: copied the output of the same inputs' compile from %s", cached)
		} else {
			t.Logf("tsc -p .: no cached compile of these inputs (%v: %s)", err, bytes.TrimSpace(out))
		}
	}
	if !hit {
		if err := os.RemoveAll(dist); err != nil {
			t.Fatal(err)
		}
		// --no: never fetch a "tsc" from the registry; the lockfile's only.
		run(npx, nil, "--no", "--", "tsc", "-p", ".")
		if cached != "" {
			if err := saveCopy(ctx, dist, cached); err != nil {
				t.Logf("tsc -p .: output not cached: %v", err)
			}
		}
	}

	args := []string{"--test"}
	if major == 18 {
		// Node 18 has fetch but keeps crypto (Web Crypto, which Workers
		// have) behind a flag; 19 and later have it on.
		args = append(args, "--experimental-global-webcrypto")
	}
	out := run(node, []string{"FLOODGATE_BIN=" + binary}, append(args, filepath.Join("dist", "worker.test.js"))...)
	if !bytes.Contains(out, []byte("# pass ")) || bytes.Contains(out, []byte("# pass 0\n")) {
		t.Fatalf("node --test passed no test")
	}
}

// tscInputs is the SHA-256 (hex) of everything `tsc -p .` in dir reads
// but the standard library: the files directly in dir (the sources,
// tsconfig.json, and package.json and package-lock.json, which pin the
// compiler and @types/node), and clients/js's package.json and src/ (the
// types of @floodgate/client, linked from ../../clients/js).
func tscInputs(t *testing.T, dir string) string {
	t.Helper()
	var files []string
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Type().IsRegular() {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	client := filepath.Join(dir, "..", "..", "clients", "js")
	files = append(files, filepath.Join(client, "package.json"))
	err = filepath.WalkDir(filepath.Join(client, "src"), func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, err := filepath.Rel(dir, f)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "%s %d\n", rel, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// findNode finds node, npm and npx on PATH and node's major version; an
// error when one is missing or node is older than 18 (no fetch, no
// node:test).
func findNode() (node string, major int, npm, npx string, err error) {
	node, err = exec.LookPath("node")
	if err != nil {
		return "", 0, "", "", fmt.Errorf("node not found: %w", err)
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		return "", 0, "", "", fmt.Errorf("node --version: %w", err)
	}
	v := strings.TrimSpace(string(out))
	if _, err := fmt.Sscanf(v, "v%d.", &major); err != nil {
		return "", 0, "", "", fmt.Errorf("node --version said %q", v)
	}
	if major < 18 {
		return "", 0, "", "", fmt.Errorf("node is %s, older than 18", v)
	}
	if npm, err = exec.LookPath("npm"); err != nil {
		return "", 0, "", "", fmt.Errorf("npm not found: %w", err)
	}
	if npx, err = exec.LookPath("npx"); err != nil {
		return "", 0, "", "", fmt.Errorf("npx not found: %w", err)
	}
	return node, major, npm, npx, nil
}

// TestReadmeCurl runs the README's "From an edge worker or curl" commands,
// as written, against a server started as `make run` starts it: a batch,
// a peek that charges nothing, a reset.
func TestReadmeCurl(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is needed to run the README's commands: apt-get install curl")
	}
	blocks := readmeBlocks(t, "## From an edge worker or curl")
	if len(blocks) != 1 || blocks[0].NotRun != "" || blocks[0].Console() {
		t.Fatalf("README's curl section has %d shell blocks (%+v), want 1 sh block, run", len(blocks), blocks)
	}
	outs, err := newDocHarness(t, false).runBlock(blocks[0])
	if err != nil {
		t.Fatal(err)
	}
	out := outs[0]
	for _, want := range []string{
		`{"allowed":true,"results":[`,                  // the batch; user:2 spends 1 of its 10/1s
		`{"allowed":true,"limit":"3","remaining":"3",`, // the peek on user:2's 3/60s: nothing spent, nothing charged
		"{}", // the reset
	} {
		i := strings.Index(out, want)
		if i < 0 {
			t.Fatalf("README commands' output lacks %s (in order):\n%s", want, out)
		}
		out = out[i+len(want):]
	}
}
