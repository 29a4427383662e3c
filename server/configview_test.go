package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/floodgate/floodgate/internal/auth"
	"github.com/floodgate/floodgate/internal/configview"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/server"
)

const debugRules = `domain: shop
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: path
    value: /login
    descriptors:
      - key: user
        rate_limit: {unit: minute, requests_per_unit: 5, name: login_per_user, failure_mode: closed, algorithm: sliding_window}
quota_buckets:
  - bucket_id: {name: free}
    rate_limit: {unit: minute, requests_per_unit: 100}
policies:
  login:
    requests_per_min: 5
`

// get fetches /debug/config with the bearer token (none when "").
func get(t *testing.T, url, token string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url+"/debug/config", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, body
}

func TestDebugConfig(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(cfgPath, []byte(debugRules), 0o600); err != nil {
		t.Fatal(err)
	}
	tokPath := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokPath, []byte("admintoken admin\nusertoken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w := &swapConfig{}
	watcher, err := rules.Watch(t.Context(), cfgPath, rules.Options{}, func(c *rules.Set) { w.cfg.Store(c) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	tokens, err := auth.NewTokenAuth(t.Context(), tokPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tokens.Close() })
	srv := httptest.NewServer(server.NewAdminHandler(server.AdminSettings{Rules: w, AdminAuth: tokens}))
	defer srv.Close()

	for _, tc := range []struct {
		name, token string
		want        int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"unknown token", "nope", http.StatusUnauthorized},
		{"not admin", "usertoken", http.StatusForbidden},
		{"admin", "admintoken", http.StatusOK},
	} {
		code, h, body := get(t, srv.URL, tc.token)
		if code != tc.want {
			t.Errorf("%s: status %d, want %d (%s)", tc.name, code, tc.want, body)
		}
		if code == http.StatusUnauthorized && h.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: 401 without WWW-Authenticate", tc.name)
		}
	}
	// Health stays open: probes carry no token.
	if resp, err := http.Get(srv.URL + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz: %v %v", resp, err)
	}

	view := fetchView(t, srv.URL, "admintoken")
	if !view.Loaded || view.LoadedAt == nil || time.Since(*view.LoadedAt) > time.Minute {
		t.Fatalf("loaded %v at %v", view.Loaded, view.LoadedAt)
	}
	if len(view.Domains) != 1 || len(view.Domains[0].Rules) != 2 {
		t.Fatalf("domains %+v", view.Domains)
	}
	want := []struct {
		name, path, alg, failure string
		line, col                int
	}{
		{"shop.remote_address", "remote_address", "fixed_window", "default", 4, 17},
		{"login_per_user", "path=/login/user", "sliding_window", "closed", 9, 21},
	}
	for i, r := range view.Domains[0].Rules {
		wr := want[i]
		if r.Name != wr.name || r.Path != wr.path || r.Algorithm != wr.alg || r.FailureMode != wr.failure ||
			r.Source != (configview.SourceView{File: cfgPath, Line: wr.line, Column: wr.col}) {
			t.Errorf("rule %d = %+v, want %+v", i, r, wr)
		}
	}
	if q := view.Domains[0].QuotaBuckets; len(q) != 1 || q[0].Source.Line != 11 || q[0].Rate == nil || q[0].Rate.Requests != 100 {
		t.Errorf("quota buckets %+v", q)
	}
	if p := view.Policies; len(p) != 1 || p[0].Source.Line != 14 || p[0].Requests != 5 {
		t.Errorf("policies %+v", p)
	}

	// A reload shows: the new rule, its line, and a later loaded_at.
	first := *view.LoadedAt
	edited := debugRules[:len("domain: shop\ndescriptors:\n")] + "  - key: tenant\n    rate_limit: {unit: hour, requests_per_unit: 7}\n" + debugRules[len("domain: shop\ndescriptors:\n"):]
	if err := os.WriteFile(cfgPath, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the reload in /debug/config", func() bool {
		v := fetchView(t, srv.URL, "admintoken")
		return len(v.Domains) == 1 && len(v.Domains[0].Rules) == 3
	})
	v := fetchView(t, srv.URL, "admintoken")
	r := v.Domains[0].Rules[0]
	if r.Name != "shop.tenant" || r.Source.Line != 4 || r.Requests != 7 || !v.LoadedAt.After(first) {
		t.Errorf("after reload: first rule %+v, loaded at %v (before %v)", r, v.LoadedAt, first)
	}
	if v.Domains[0].Rules[1].Source.Line != 6 {
		t.Errorf("remote_address moved to line %d, want 6", v.Domains[0].Rules[1].Source.Line)
	}
}

func fetchView(t *testing.T, url, token string) configview.ConfigView {
	t.Helper()
	code, h, body := get(t, url, token)
	if code != http.StatusOK || h.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, content type %q: %s", code, h.Get("Content-Type"), body)
	}
	var v configview.ConfigView
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return v
}

// Without tokens configured /debug/config is open, like /metrics; without
// rules it says so.
func TestDebugConfigOpenWithoutTokens(t *testing.T) {
	srv := httptest.NewServer(server.NewAdminHandler(server.AdminSettings{}))
	defer srv.Close()
	v := fetchView(t, srv.URL, "")
	if v.Loaded || v.LoadedAt != nil || v.Domains == nil || len(v.Domains) != 0 {
		t.Errorf("no rules: %+v", v)
	}
}
