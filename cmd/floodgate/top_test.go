package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/internal/auth"
	"github.com/floodgate/floodgate/internal/limited"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/server"
)

// topReplica is an admin server whose tracker has seen denials of the
// given keys (value: count) under shop's per_ip rule.
func topReplica(t *testing.T, now time.Time, keys map[string]int, authz *auth.TokenAuth) string {
	t.Helper()
	tr := limited.New(limited.Config{})
	l := &rules.Limit{Name: "per_ip", ID: "shop|ip|0", Domain: "shop"}
	for k, n := range keys {
		for range n {
			tr.ObserveEnvoy(now, l, []rules.Entry{{Key: "ip", Value: k}}, 1, false)
		}
	}
	s := server.AdminSettings{Limited: tr, Clock: func() time.Time { return now }, AdminAuth: authz}
	srv := httptest.NewServer(server.NewAdminHandler(s))
	t.Cleanup(srv.Close)
	return srv.URL
}

func runTopArgs(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), append([]string{"top"}, args...), func(string) string { return "" }, &out, &errOut)
	return out.String(), errOut.String(), err
}

func TestTopMergesReplicas(t *testing.T) {
	now := time.Now()
	a := topReplica(t, now, map[string]int{"1.1.1.1": 5, "2.2.2.2": 2}, nil)
	b := topReplica(t, now, map[string]int{"2.2.2.2": 6, "evil\x1b]0;pwned\a": 1}, nil)
	out, _, err := runTopArgs(t, "--addr", a, "--addr", strings.TrimPrefix(b, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out, "\n")
	if !strings.Contains(lines[0], "2 replica(s)") || !strings.Contains(out, "shop / per_ip") {
		t.Fatalf("output:\n%s", out)
	}
	first, second := -1, -1
	for i, l := range lines {
		switch {
		case strings.HasSuffix(l, "ip=2.2.2.2"):
			first = i
			if !strings.Contains(l, "8.0") {
				t.Errorf("2.2.2.2's line %q, want 8 denied (2 + 6)", l)
			}
		case strings.HasSuffix(l, "ip=1.1.1.1"):
			second = i
		}
	}
	if first < 0 || second < first {
		t.Errorf("want 2.2.2.2 (8) above 1.1.1.1 (5):\n%s", out)
	}
	if strings.ContainsAny(out[len(lines[0]):], "\x1b\a") {
		t.Errorf("a key reached the terminal unescaped:\n%q", out)
	}
	if !strings.Contains(out, `ip=evil\u{001b}]0;pwned\u{0007}`) {
		t.Errorf("the escaped key is missing:\n%s", out)
	}

	js, _, err := runTopArgs(t, "--addr", a, "--addr", b, "--json", "--k", "1")
	if err != nil {
		t.Fatal(err)
	}
	var r limited.Report
	if err := json.Unmarshal([]byte(js), &r); err != nil {
		t.Fatal(err)
	}
	if r.Replicas != 2 || len(r.Rules) != 1 || len(r.Rules[0].Keys) != 1 || r.Rules[0].Keys[0].Denied.Total != 8 {
		t.Errorf("--json: %+v", r)
	}
}

func TestTopRefusalsAndFailures(t *testing.T) {
	now := time.Now()
	tokPath := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokPath, []byte("admintoken admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := auth.NewTokenAuth(t.Context(), tokPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tokens.Close() })
	guarded := topReplica(t, now, map[string]int{"9.9.9.9": 3}, tokens)

	_, stderr, err := runTopArgs(t, "--addr", guarded)
	var code exitCode
	if !errors.As(err, &code) || code != 1 || !strings.Contains(stderr, "401") {
		t.Errorf("without the token: %v, %q; want exit 1 and the 401", err, stderr)
	}
	out, _, err := runTopArgs(t, "--addr", guarded, "--token", "admintoken")
	if err != nil || !strings.Contains(out, "ip=9.9.9.9") {
		t.Errorf("with the token: %v\n%s", err, out)
	}

	down := httptest.NewServer(nil)
	down.Close()
	out, _, err = runTopArgs(t, "--addr", guarded, "--addr", down.URL, "--token", "admintoken")
	if !errors.As(err, &code) || code != 1 || !strings.Contains(out, "ip=9.9.9.9") || !strings.Contains(out, "! ") {
		t.Errorf("one address down: %v\n%s; want exit 1, the other's keys and the failure", err, out)
	}

	for _, args := range [][]string{{"--by", "x"}, {"--window", "2h"}, {"--k", "-1"}, {"--addr", "ftp://x"}, {"--watch", "--json"}, {"extra"}} {
		if _, _, err := runTopArgs(t, args...); !errors.As(err, &code) || code != 2 {
			t.Errorf("%q: %v, want exit 2", args, err)
		}
	}
}
