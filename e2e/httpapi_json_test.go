package e2e

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/internal/redistest"
)

// The HTTP door as people type it, and Envoy's API as JSON at /json,
// against the built binary.

// TestHTTPAPITypedRequest: the request a fetch or curl user writes (a
// lower-case algorithm, "1m", no Content-Type) is decided; the fourth of a
// 3-per-minute limit is denied with a 200 by default and a 429 when the
// request asks (?deny_status=429) or the server does (--http-deny-status).
func TestHTTPAPITypedRequest(t *testing.T) {
	body := `{"key":"k","algorithm":"token_bucket","limit":{"requests":3,"period":"1m"}}`
	for _, tc := range []struct {
		name  string
		args  []string
		query string
		want  int
	}{
		{"default", nil, "", 200},
		{"per request", nil, "?deny_status=429", 429},
		{"per server", []string{"--http-deny-status", "429"}, "", 429},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startServe(t, tc.args...)
			for i := 1; i <= 3; i++ {
				a := postWith(t, p, "/v1/check"+tc.query, body, nil)
				if a.status != 200 || !bytes.Contains(a.body, []byte(`"allowed":true`)) {
					t.Fatalf("check %d: %d %s, want 200 allowed", i, a.status, a.body)
				}
			}
			a := postWith(t, p, "/v1/check"+tc.query, body, nil)
			if a.status != tc.want || !bytes.Contains(a.body, []byte(`"allowed":false`)) || a.header.Get("Retry-After") == "" {
				t.Errorf("check 4: %d %s (Retry-After %q), want %d, allowed false, Retry-After", a.status, a.body, a.header.Get("Retry-After"), tc.want)
			}
		})
	}
	out, err := exec.Command(binary, "serve", "--http-deny-status", "403").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--http-deny-status must be 200 or 429, got 403") {
		t.Errorf("--http-deny-status 403: %v %s, want a refusal naming the choice", err, out)
	}
}

// envoyJSONRules is the reference's /json example's domain.
const envoyJSONRules = `domain: dummy
descriptors:
  - key: perday
    rate_limit: {unit: day, requests_per_unit: 1}
`

// TestEnvoyJSON: POST /json answers as envoyproxy/ratelimit's does: the
// RateLimitResponse as protojson, 200 while OK, then 429 over the limit,
// to the reference's own curl example (a form's Content-Type), both with
// floodgate's flags and run as the reference (drop-in mode, on Redis).
func TestEnvoyJSON(t *testing.T) {
	req := `{"domain": "dummy", "descriptors": [{"entries": [{"key": "perday"}]}]}`
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) *proc
	}{
		{"serve", func(t *testing.T) *proc { return startServe(t, "--config", writeRules(t, envoyJSONRules)) }},
		{"drop-in", func(t *testing.T) *proc {
			r := redistest.StartServer(t)
			// REDIS_TIMEOUT: room for a busy machine; the answers checked
			// are the Redis server's, never a failure mode's.
			env := map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": r.Addr(), "REDIS_TIMEOUT": "5s"}
			return startAsReference(t, referenceEnv(t, map[string]string{"dummy.yaml": envoyJSONRules}, env))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.start(t)
			form := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
			ok := postWith(t, p, "/json", req, form)
			if ok.status != 200 || !strings.HasPrefix(string(ok.body), `{"overallCode":"OK","statuses":[{"code":"OK","currentLimit":{"requestsPerUnit":1,"unit":"DAY"}`) {
				t.Errorf("first: %d %s, want 200 OK\n%s", ok.status, ok.body, p.logs)
			}
			over := postWith(t, p, "/json", req, form)
			if over.status != 429 || !strings.HasPrefix(string(over.body), `{"overallCode":"OVER_LIMIT","statuses":[{"code":"OVER_LIMIT","currentLimit":{"requestsPerUnit":1,"unit":"DAY"}`) ||
				over.header.Get("Content-Type") != "application/json" {
				t.Errorf("second: %d %s %s, want 429 OVER_LIMIT as application/json", over.status, over.header.Get("Content-Type"), over.body)
			}
		})
	}
}
