package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/memstore"
)

// `go test ./cmd/floodgate -run TestCheckGolden -update` rewrites the
// golden files. The flag is shared with other golden tests of this
// package, so it is registered only once, after every package-level
// flag.Bool has run.
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files")
	}
}

func updateGolden() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// checkEpoch is the stopped clock of the CLI tests' floodgate.
var checkEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

type policies struct{ cfg *rules.Set }

func (p policies) Current() *rules.Set { return p.cfg }

// startCheckServer runs a real floodgate (embedded store, clock stopped at
// checkEpoch, the test config's policies) on a free loopback port.
func startCheckServer(t *testing.T, st store.Store) string {
	t.Helper()
	cfg, err := rules.Parse("policies.yaml", []byte(`policies:
  login: {algorithm: sliding_window, requests: 5, period: 15m, failure_mode: closed}
  free: {algorithm: token_bucket, requests_per_min: 15, burst: 30}
`))
	if err != nil {
		t.Fatal(err)
	}
	rl := server.NewRateLimiter(st, server.CheckSettings{Settings: server.Settings{
		Rules:  policies{cfg},
		Clock:  func() time.Time { return checkEpoch },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}})
	srv, _ := server.NewGRPCServer(rl, nil, server.GRPCSettings{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(func() { srv.Stop(); st.Close() })
	return lis.Addr().String()
}

// downStore is a store whose backend is always down.
type downStore struct{}

func (downStore) Decide(context.Context, time.Time, []store.Request, []algorithms.Decision) error {
	return store.ErrUnavailable
}
func (downStore) Reset(context.Context, algorithms.Algorithm, string, ...string) error {
	return store.ErrUnavailable
}
func (downStore) Ping(context.Context) error { return store.ErrUnavailable }
func (downStore) Close() error               { return nil }

// runCLI runs the program as main would and returns its exit status and
// output.
func runCLI(args []string, env map[string]string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	err := run(context.Background(), args, func(k string) string { return env[k] }, &out, &errb)
	var ec exitCode
	switch {
	case err == nil:
	case errors.As(err, &ec):
		code = int(ec)
	default:
		fmt.Fprintln(&errb, "floodgate:", err)
		code = 1
	}
	return code, out.String(), errb.String()
}

// TestCheckGolden pins `floodgate check`'s output for allowed, denied and
// error cases against testdata/check/*.golden.
func TestCheckGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		down bool // the server's store is down: failure modes answer
	}{
		{"allowed", []string{"--key", "user:1", "--limit", "10/1m", "--algorithm", "sliding_window"}, nil, false},
		{"denied", []string{"--key", "user:1", "--limit", "3/1m", "--algorithm", "sliding_window", "--repeat", "5"}, nil, false},
		{"token_bucket_cost", []string{"--key", "export:acme", "--limit", "10/m", "--burst", "20", "--cost", "6", "--repeat", "4"}, nil, false},
		{"json", []string{"--key", "user:1", "--limit", "2/1m", "--algorithm", "fixed_window", "--repeat", "3", "--json"}, nil, false},
		{"policy", []string{"--key", "login:alice", "--policy", "login", "--repeat", "6"}, nil, false},
		{"env", []string{}, map[string]string{"FLOODGATE_KEY": "env:1", "FLOODGATE_LIMIT": "1/1s", "FLOODGATE_REPEAT": "2", "FLOODGATE_JSON": "true"}, false},
		{"flag_beats_env", []string{"--repeat", "1"}, map[string]string{"FLOODGATE_KEY": "env:1", "FLOODGATE_LIMIT": "1/1s", "FLOODGATE_REPEAT": "3"}, false},
		{"degraded_open", []string{"--key", "k", "--limit", "3/1m", "--repeat", "2"}, nil, true},
		{"degraded_closed", []string{"--key", "login:alice", "--policy", "login", "--json"}, nil, true},
		{"fail_on_deny", []string{"--key", "k", "--limit", "1/h", "--repeat", "2", "--fail-on-deny"}, nil, false},
		{"fail_on_deny_all_allowed", []string{"--key", "k", "--limit", "2/h", "--repeat", "2", "--fail-on-deny"}, nil, false},
		{"error_cost", []string{"--key", "k", "--limit", "3/1m", "--cost", "4"}, nil, false},
		{"error_unknown_policy", []string{"--key", "k", "--policy", "gold"}, nil, false},
		{"error_policy_algorithm", []string{"--key", "k", "--policy", "login", "--algorithm", "token_bucket"}, nil, false},
		{"error_period", []string{"--key", "k", "--limit", "3/1500us", "--algorithm", "fixed_window"}, nil, false},
		{"usage_limit", []string{"--key", "k", "--limit", "10/fortnight"}, nil, false},
		{"usage_limit_and_policy", []string{"--key", "k", "--limit", "10/1m", "--policy", "login"}, nil, false},
		{"usage_no_key", []string{"--limit", "10/1m"}, nil, false},
		{"usage_algorithm", []string{"--key", "k", "--limit", "10/1m", "--algorithm", "leaky"}, nil, false},
		{"leaky_bucket", []string{"--key", "partner", "--limit", "10/1s", "--algorithm", "leaky_bucket", "--burst", "3", "--repeat", "5"}, nil, false},
		{"usage_unknown_flag", []string{"--key", "k", "--limt", "10/1m"}, nil, false},
		{"calendar_month", []string{"--key", "k", "--limit", "3/calendar_month", "--time-zone", "Asia/Jakarta", "--repeat", "4"}, nil, false},
		{"calendar_day_sliding", []string{"--key", "k", "--limit", "2/calendar_day", "--algorithm", "sliding_window", "--repeat", "3", "--json"}, nil, false},
		{"error_calendar_token_bucket", []string{"--key", "k", "--limit", "3/calendar_week", "--algorithm", "token_bucket"}, nil, false},
		{"usage_time_zone", []string{"--key", "k", "--limit", "3/calendar_month", "--time-zone", "Mars/Olympus"}, nil, false},
		{"usage_calendar", []string{"--key", "k", "--limit", "3/calendar_fortnight"}, nil, false},
		{"usage_time_zone_without_calendar", []string{"--key", "k", "--limit", "3/1m", "--time-zone", "Asia/Jakarta"}, nil, false},
		{"help", []string{"--help"}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var st store.Store = memstore.New(memstore.Config{})
			if tc.down {
				st = downStore{}
			}
			addr := startCheckServer(t, st)
			args := append([]string{"check", "--addr", addr}, tc.args...)
			code, stdout, stderr := runCLI(args, tc.env)
			var got strings.Builder
			fmt.Fprintf(&got, "$ %s\n", strings.Join(append([]string{"floodgate", "check"}, tc.args...), " "))
			for _, k := range slices.Sorted(maps.Keys(tc.env)) {
				fmt.Fprintf(&got, "$ # with %s=%s\n", k, tc.env[k])
			}
			fmt.Fprintf(&got, "exit %d\n-- stdout --\n%s-- stderr --\n%s", code, stdout, stderr)
			compareGolden(t, filepath.Join("testdata", "check", tc.name+".golden"), strings.ReplaceAll(got.String(), addr, "ADDR"))
		})
	}
}

func compareGolden(t *testing.T, path, got string) {
	t.Helper()
	if updateGolden() {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Fatalf("output differs from %s (run with -update to accept)\n--- got\n%s--- want\n%s", path, got, want)
	}
}

// TestCheckUnreachable: no floodgate at --addr is an error (exit 1) naming
// the code, after the timeout at most.
func TestCheckUnreachable(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	code, stdout, stderr := runCLI([]string{"check", "--addr", addr, "--key", "k", "--limit", "1/s", "--repeat", "3"}, nil)
	if code != checkExitError || stdout != "" || !strings.HasPrefix(stderr, "floodgate check: attempt 1: Unavailable: ") {
		t.Fatalf("got exit %d, stdout %q, stderr %q; want exit 1, no stdout, \"floodgate check: attempt 1: Unavailable: ...\"", code, stdout, stderr)
	}
}

// TestCheckTokenNeedsTLS: the CLI refuses to send a token in the clear to
// a remote address.
func TestCheckTokenNeedsTLS(t *testing.T) {
	code, _, stderr := runCLI([]string{"check", "--addr", "floodgate.example:8081", "--key", "k", "--limit", "1/s", "--token", "s3cret"}, nil)
	if code != checkExitError || !strings.Contains(stderr, "needs WithTLS") || strings.Contains(stderr, "s3cret") {
		t.Fatalf("got exit %d, stderr %q; want exit 1, a refusal that does not echo the token", code, stderr)
	}
	code, _, stderr = runCLI([]string{"check", "--key", "k", "--limit", "1/s", "--tls-ca", filepath.Join(t.TempDir(), "missing.pem")}, nil)
	if code != checkExitUsage || !strings.Contains(stderr, "--tls-ca") {
		t.Fatalf("missing CA: got exit %d, stderr %q; want exit 2 naming --tls-ca", code, stderr)
	}
	code, _, stderr = runCLI([]string{"check", "--key", "k", "--limit", "1/s", "--tls-client-cert", "c.pem"}, nil)
	if code != checkExitUsage || !strings.Contains(stderr, "go together") {
		t.Fatalf("cert without key: got exit %d, stderr %q; want exit 2", code, stderr)
	}
}

// TestCheckBadFlags: bad flags exit 2 with the first problem named, the
// key first, then the attempts, then the limit.
func TestCheckBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--key", "k", "--limit", "1/s", "extra"}, `unexpected argument "extra"`},
		{[]string{"--limit", "1/s", "--repeat", "0"}, "--key is required"},
		{[]string{"--key", "k", "--limit", "1/s", "--repeat", "0"}, "--repeat must be at least 1, got 0"},
		{[]string{"--key", "k", "--limit", "1/s", "--cost", "0"}, "--cost must be at least 1, got 0"},
		{[]string{"--key", "k", "--repeat", "0"}, "--repeat must be at least 1"},
		{[]string{"--key", "k", "--cost", "-1"}, "--cost must be at least 1, got -1"},
		{[]string{"--key", "k"}, "give exactly one of --limit and --policy"},
	} {
		code, stdout, stderr := runCLI(append([]string{"check"}, tc.args...), nil)
		if code != checkExitUsage || stdout != "" || !strings.HasPrefix(stderr, "floodgate check: "+tc.want) {
			t.Errorf("check %q: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, code, stdout, stderr, tc.want)
		}
	}
}

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in       string
		requests int64
		period   time.Duration
		err      bool
	}{
		{"10/1m", 10, time.Minute, false},
		{"10/m", 10, time.Minute, false},
		{"5/15m", 5, 15 * time.Minute, false},
		{"100/h", 100, time.Hour, false},
		{" 3 / 1s ", 3, time.Second, false},
		{"1/1500ms", 1, 1500 * time.Millisecond, false},
		{"10", 0, 0, true},
		{"0/1m", 0, 0, true},
		{"-1/1m", 0, 0, true},
		{"x/1m", 0, 0, true},
		{"10/", 0, 0, true},
		{"10/0s", 0, 0, true},
		{"10/-1m", 0, 0, true},
		{"10/day", 10, 24 * time.Hour, false},
		{"10/1d", 10, 24 * time.Hour, false},
		{"10/d", 10, 24 * time.Hour, false},
		{"10/7days", 10, 7 * 24 * time.Hour, false},
		{"10/2 hours", 10, 2 * time.Hour, false},
		{"10/hour", 10, time.Hour, false},
		{"10/min", 10, time.Minute, false},
		{"10/30sec", 10, 30 * time.Second, false},
		{"10/second", 10, time.Second, false},
		{"10/250ms", 10, 250 * time.Millisecond, false},
		{"10/1h30m", 10, 90 * time.Minute, false},
		{"10/0d", 0, 0, true},
		{"10/fortnight", 0, 0, true},
		{"10/ds", 0, 0, true},
		{"10/1dd", 0, 0, true},
		{"10/99999999999999999999d", 0, 0, true},
		{"10/9999999999999d", 0, 0, true},
		{"10/ms5", 0, 0, true},
	} {
		requests, period, err := parseRate(tc.in)
		if (err != nil) != tc.err || requests != tc.requests || period != tc.period {
			t.Errorf("parseRate(%q): got %d, %v, %v; want %d, %v, error %v", tc.in, requests, period, err, tc.requests, tc.period, tc.err)
		}
	}
}
