package server_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/internal/auth"
	"github.com/floodgate/floodgate/server"
)

// TestAdminPprofBehindAdminToken: with AdminAuth, every profiler
// endpoint answers 401 without a known token and 403 with a token that
// is not an admin one, and serves an admin token; without AdminAuth it is
// open; /healthz stays open either way.
func TestAdminPprofBehindAdminToken(t *testing.T) {
	tokPath := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokPath, []byte("admintoken admin\nusertoken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.NewTokenAuth(t.Context(), tokPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tokens.Close() })
	paths := []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/symbol", "/debug/pprof/goroutine?debug=1",
		"/debug/pprof/profile?seconds=1", "/debug/pprof/trace?seconds=1"}
	get := func(url, token string) (int, http.Header, string) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}
	guarded := httptest.NewServer(server.NewAdminHandler(server.AdminSettings{Pprof: true, AdminAuth: tokens}))
	defer guarded.Close()
	open := httptest.NewServer(server.NewAdminHandler(server.AdminSettings{Pprof: true}))
	defer open.Close()
	for _, path := range paths {
		for _, tc := range []struct {
			token string
			want  int
		}{{"", 401}, {"nope", 401}, {"usertoken", 403}, {"admintoken", 200}} {
			code, h, body := get(guarded.URL+path, tc.token)
			if code != tc.want {
				t.Errorf("%s with %q: %d, want %d", path, tc.token, code, tc.want)
			}
			if code == 401 && h.Get("WWW-Authenticate") == "" {
				t.Errorf("%s with %q: 401 without WWW-Authenticate", path, tc.token)
			}
			if code != 200 && strings.Contains(body, "server.test") {
				t.Errorf("%s with %q: the refusal shows the command line", path, tc.token)
			}
		}
		if code, _, _ := get(open.URL+path, ""); code != 200 {
			t.Errorf("%s without AdminAuth: %d, want 200", path, code)
		}
	}
	if code, _, _ := get(guarded.URL+"/healthz", ""); code != 200 {
		t.Errorf("/healthz with AdminAuth: %d, want 200", code)
	}
}
