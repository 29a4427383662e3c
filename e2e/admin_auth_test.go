package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// adminGet GETs path on p's admin port with token (none when "") and
// returns the status and body.
func adminGet(t *testing.T, p *proc, path, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+p.HTTPAddr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestAdminPprofNeedsAdminToken: with --auth-token-file, every profiler
// endpoint, like /debug/config, needs an admin token: the command line
// (/debug/pprof/cmdline) and goroutine dumps are no one else's to read.
// Probes and the metrics scraper stay open.
func TestAdminPprofNeedsAdminToken(t *testing.T) {
	const userToken, adminToken = "svc-token-p9Qm2", "ops-token-L0wz7"
	tokens := writeFile(t, t.TempDir(), "tokens", []byte(adminToken+" admin\n"+userToken+"\n"))
	p := startServe(t, "--pprof", "--auth-token-file", tokens)
	paths := []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/goroutine?debug=2", "/debug/pprof/heap",
		"/debug/pprof/symbol", "/debug/pprof/profile?seconds=1", "/debug/pprof/trace?seconds=1", "/debug/config"}
	for _, path := range paths {
		for _, tc := range []struct {
			token string
			want  int
		}{{"", http.StatusUnauthorized}, {"wrong-token", http.StatusUnauthorized}, {userToken, http.StatusForbidden}, {adminToken, http.StatusOK}} {
			code, body := adminGet(t, p, path, tc.token)
			if code != tc.want {
				t.Errorf("GET %s with token %q: %d, want %d", path, tc.token, code, tc.want)
			}
			// The token file's path is on the command line; the flag's
			// name alone is in every refusal, saying what to send.
			if code != http.StatusOK && strings.Contains(body, tokens) {
				t.Errorf("GET %s with token %q: a refusal shows the command line: %q", path, tc.token, body)
			}
		}
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if code, _ := adminGet(t, p, path, ""); code != http.StatusOK {
			t.Errorf("GET %s without a token: %d, want 200", path, code)
		}
	}
}
