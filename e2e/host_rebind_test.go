package e2e

import (
	"net/http"
	"strings"
	"testing"
)

// TestHTTPHostRebinding: on a loopback port without tokens, a request
// whose Host names a domain an attacker could rebind to 127.0.0.1 (a
// browser page there is same-origin) is refused (403) for Reset, Settle,
// /debug/config and the admin page; decisions and probes answer it, and
// localhost, an IP address or a name given with --http-allowed-hosts pass.
func TestHTTPHostRebinding(t *testing.T) {
	const rebound = "rebind.attacker.example"
	reset := `{"key": "victim", "algorithm": "ALGORITHM_FIXED_WINDOW", "limit": {"requests": 1, "period": "60s"}}`
	request := func(t *testing.T, p *proc, method, path, host, body string) int {
		t.Helper()
		req, err := http.NewRequest(method, "http://"+p.HTTPAddr+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		return do(t, req).status
	}
	p := startServe(t)
	_, port, _ := strings.Cut(p.HTTPAddr, ":")
	for _, tc := range []struct {
		method, path, body string
		guarded            bool
	}{
		{"POST", "/v1/reset", reset, true},
		{"POST", "/v1/settle", `{"key": "victim", "limit": {"requests": 1, "period": "60s"}, "reserved": "1", "actual": "0", "idempotencyKey": "x1"}`, true},
		{"GET", "/debug/config", "", true},
		{"GET", "/", "", true},
		{"POST", "/v1/check", reset, false},
		{"GET", "/readyz", "", false},
		{"GET", "/metrics", "", false},
	} {
		code := request(t, p, tc.method, tc.path, rebound+":"+port, tc.body)
		if guarded := code == http.StatusForbidden; guarded != tc.guarded {
			t.Errorf("%s %s with Host %s: %d, want refused: %v", tc.method, tc.path, rebound, code, tc.guarded)
		}
		for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port} {
			if code := request(t, p, tc.method, tc.path, host, tc.body); code == http.StatusForbidden {
				t.Errorf("%s %s with Host %s: 403, want it served", tc.method, tc.path, host)
			}
		}
	}

	allowed := startServe(t, "--http-allowed-hosts", "ratelimit.internal,"+rebound)
	_, port, _ = strings.Cut(allowed.HTTPAddr, ":")
	if code := request(t, allowed, "POST", "/v1/reset", rebound+":"+port, reset); code != http.StatusOK {
		t.Errorf("Reset with an allowed Host: %d, want 200", code)
	}
	if code := request(t, allowed, "POST", "/v1/reset", "other.example:"+port, reset); code != http.StatusForbidden {
		t.Errorf("Reset with a Host not allowed: %d, want 403", code)
	}
}
