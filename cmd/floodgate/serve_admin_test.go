package main

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/floodgate/floodgate/internal/auth"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/store"
)

// TestAdminDebugConfigWiring: serve's admin server has /debug/config on
// the live rules, behind the admin token of --auth-token-file, and open
// without one.
func TestAdminDebugConfigWiring(t *testing.T) {
	dir := t.TempDir()
	tokPath := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokPath, []byte("admintoken admin\nusertoken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.NewTokenAuth(t.Context(), tokPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tokens.Close() })
	cfg, err := rules.Parse("shop.yaml", []byte(explainRules))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		tokens *auth.TokenAuth
		want   map[string]int // token -> status
	}{
		{"tokens", tokens, map[string]int{"": 401, "usertoken": 403, "admintoken": 200}},
		{"no tokens", nil, map[string]int{"": 200}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, st := adminTestStore(t)
			reg, metrics := newMetrics()
			var draining atomic.Bool
			admin, err := serveEnv{f: &f, reg: reg, metrics: metrics}.buildAdmin(st, server.Settings{Rules: policies{cfg}}, grpcPipeline{tokens: tc.tokens}, &draining)
			if err != nil {
				t.Fatal(err)
			}
			go admin.srv.Serve(admin.lis)
			defer admin.srv.Close()
			for token, want := range tc.want {
				req, _ := http.NewRequest(http.MethodGet, "http://"+admin.lis.Addr().String()+"/debug/config", nil)
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != want {
					t.Errorf("token %q: status %d, want %d: %s", token, resp.StatusCode, want, body)
				}
				if want == 200 && !debugContainsAll(string(body), `"file": "shop.yaml"`, `"line": 9`, `"loaded_at"`, `"name": "login_per_user"`) {
					t.Errorf("body lacks the rules' sources:\n%s", body)
				}
			}
		})
	}
}

func debugContainsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// adminTestStore parses serve's flags with only an HTTP address on a free
// loopback port and builds their store (the embedded one), closed when t
// ends.
func adminTestStore(t *testing.T) (serveFlags, store.Store) {
	t.Helper()
	var f serveFlags
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.register(fs)
	if err := parseFlags(fs, []string{"--http-addr", "127.0.0.1:0"}, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	st, _, err := serveEnv{f: &f, log: slog.Default()}.buildStore(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return f, st
}
