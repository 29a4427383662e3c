package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/auth"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/internal/xdsrules"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/store"
)

// TestAdminDebugConfigWiring: serve's admin server has /debug/config on
// the live rules, behind the admin token of --auth-token-file, and open
// without one.
func TestAdminDebugConfigWiring(t *testing.T) {
	tokens := testTokens(t, "admintoken admin\nusertoken\n")
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
			admin, err := serveEnv{f: &f, reg: reg, metrics: metrics}.buildAdmin(st, decisionAPIs{settings: server.Settings{Rules: policies{cfg}}}, grpcPipeline{tokens: tc.tokens}, &draining)
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

// testTokens is a token file holding lines, watched until t ends.
func testTokens(t *testing.T, lines string) *auth.TokenAuth {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.NewTokenAuth(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tokens.Close() })
	return tokens
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
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
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

// TestBuildAPIsCarriesTheEnv: the settings both decision APIs are built
// with take the failure mode, the logger and the metrics of the serveEnv,
// and its flags.
func TestBuildAPIsCarriesTheEnv(t *testing.T) {
	f, st := adminTestStore(t)
	f.maxKeyBytes = 77
	_, metrics := newMetrics()
	log := slog.New(slog.DiscardHandler)
	env := serveEnv{f: &f, failureMode: rules.FailureClosed, log: log, metrics: metrics}
	s := env.buildAPIs(st, nil, nil, nil).settings
	if s.FailureMode != rules.FailureClosed || s.Logger != log || s.Metrics != metrics || s.MaxKeyBytes != 77 {
		t.Errorf("settings %+v: want failure mode closed, the env's logger and metrics, max key bytes 77", s)
	}
}

// TestAdminServesTheEnvsMetricsAndTokens: the admin server's /metrics
// shows the store calls counted through the serveEnv's metrics, and its
// HTTP/JSON API asks for the gRPC pipeline's tokens.
func TestAdminServesTheEnvsMetricsAndTokens(t *testing.T) {
	tokens := testTokens(t, "usertoken\n")
	f, _ := adminTestStore(t)
	reg, metrics := newMetrics()
	env := serveEnv{f: &f, log: slog.New(slog.DiscardHandler), reg: reg, metrics: metrics}
	st, _, err := env.buildStore(t.Context(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	l := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 5, Period: time.Minute}
	if err := st.Decide(t.Context(), time.Now(), []store.Request{{Key: "k", Limit: l, Cost: 1}}, make([]algorithms.Decision, 1)); err != nil {
		t.Fatal(err)
	}
	var draining atomic.Bool
	admin, err := env.buildAdmin(st, decisionAPIs{}, grpcPipeline{tokens: tokens}, &draining)
	if err != nil {
		t.Fatal(err)
	}
	go admin.srv.Serve(admin.lis)
	defer admin.srv.Close()
	base := "http://" + admin.lis.Addr().String()

	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `floodgate_store_duration_seconds_count{backend="memory",op="decide"} 1`) {
		t.Errorf("/metrics: %d, want 200 with one decide on the memory store:\n%s", resp.StatusCode, body)
	}
	resp, err = http.Post(base+"/v1/check", "application/json", strings.NewReader(`{"key":"k"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("/v1/check without a token: %d, want 401", resp.StatusCode)
	}
}

// TestLoadRulesReadsTheEnvsConfig: loadRules loads the file of the
// serveEnv's --config into the live rules.
func TestLoadRulesReadsTheEnvsConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shop.yaml")
	if err := os.WriteFile(path, []byte(explainRules), 0o600); err != nil {
		t.Fatal(err)
	}
	f := serveFlags{configPath: path}
	_, metrics := newMetrics()
	live := xdsrules.NewLive(nil)
	reload, err := serveEnv{f: &f, log: slog.New(slog.DiscardHandler), metrics: metrics}.loadRules(t.Context(), live)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFiles(reload)
	if c := live.Current(); c == nil || len(c.Domains()) != 1 || c.Domains()[0] != "shop" || len(reload) != 1 {
		t.Fatalf("live rules %v (reloadables %d), want the domain shop of %s and one reloadable", c, len(reload), path)
	}
}
