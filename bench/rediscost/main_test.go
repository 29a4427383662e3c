package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/bench/internal/benchproc"
)

// TestTargetOf: each row's target follows the token bucket's at the same
// decisions a call, with the token bucket's own bounds at 8 and 1 a call.
func TestTargetOf(t *testing.T) {
	lim := func(a algorithms.Algorithm) subject { return subject{limit: algorithms.Limit{Algorithm: a}} }
	tests := []struct {
		name    string
		sub     subject
		perCall int
		instr   float64
		b       bases
		met     string
	}{
		{"token bucket at 8, at the bound", lim(algorithms.TokenBucket), 8, 30_000, bases{gcra: 25_000}, "yes"},
		{"token bucket at 8, above", lim(algorithms.TokenBucket), 8, 30_001, bases{gcra: 25_000}, "**no**"},
		{"token bucket at 1, at the bound", lim(algorithms.TokenBucket), 1, 60_000, bases{gcra: 50_000}, "yes"},
		{"token bucket at 1, above", lim(algorithms.TokenBucket), 1, 60_001, bases{gcra: 50_000}, "**no**"},
		{"fixed window at 8 within 1.2x the pattern", lim(algorithms.FixedWindow), 8, 12_000, bases{incr: 10_000, tb: 1}, "yes"},
		{"fixed window at 8 beyond 1.2x the pattern", lim(algorithms.FixedWindow), 8, 12_001, bases{incr: 10_000, tb: 1e9}, "**no**"},
		{"fixed window at 1 follows the token bucket", lim(algorithms.FixedWindow), 1, 39_000, bases{incr: 1, tb: 30_000}, "yes"},
		{"sliding window within 1.3x", lim(algorithms.SlidingWindow), 8, 39_000, bases{tb: 30_000}, "yes"},
		{"sliding window beyond 1.3x", lim(algorithms.SlidingWindow), 8, 39_001, bases{tb: 30_000}, "**no**"},
		{"log within 2x", lim(algorithms.SlidingWindowLog), 8, 60_000, bases{tb: 30_000}, "yes"},
		{"log beyond 2x", lim(algorithms.SlidingWindowLog), 8, 60_001, bases{tb: 30_000}, "**no**"},
		{"the reference has none", subject{ref: "fgref_gcra"}, 8, 1, bases{tb: 30_000}, "–"},
		{"the pattern has none", subject{ref: refIncr}, 8, 1, bases{tb: 30_000}, "–"},
		{"no token bucket row", lim(algorithms.SlidingWindow), 8, 1, bases{}, "–"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, met := targetOf(&row{sub: tc.sub, perCall: tc.perCall, instr: tc.instr}, tc.b); met != tc.met {
				t.Fatalf("met %q, want %q", met, tc.met)
			}
		})
	}
}

// TestTotals reads the instruction count of a callgrind dump from its
// totals line, and refuses a dump without one.
func TestTotals(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	if err := os.WriteFile(good, []byte("events: Ir\nsummary: 18446744073709551030\nfn=x\n1 2\ntotals: 319322\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, err := totals(good); err != nil || n != 319322 {
		t.Fatalf("totals = %d, %v; want 319322", n, err)
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("events: Ir\nsummary: 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := totals(bad); err == nil {
		t.Fatal("no error for a dump without a totals line")
	}
}

// TestCronIn reads serverCron's inclusive count from callgrind_annotate's
// output, and 0 when the cron did not run.
func TestCronIn(t *testing.T) {
	out := "--------\n42,778,577 ( 0.00%)  ???:aeMain [/usr/bin/redis-server]\n 1,158,784 ( 0.00%)  ???:serverCron [/usr/bin/redis-server]\n    75,058 ( 0.00%)  ???:beforeSleep [/usr/bin/redis-server]\n"
	if got := cronIn(out); got != 1_158_784 {
		t.Fatalf("cronIn = %d, want 1158784", got)
	}
	if got := cronIn("42 ( 0.00%)  ???:aeMain [x]\n"); got != 0 {
		t.Fatalf("no cron: cronIn = %d, want 0", got)
	}
}

// TestReferenceGCRA: the reference is an exact GCRA: of a burst of 3
// (T 10 s, tau 20 s) three calls at once are admitted and the fourth is
// not, one call of four keys admits each once, and a state that is not
// an 8-byte integer is refused. Skipped without redis-server, but in CI.
func TestReferenceGCRA(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no redis-server on PATH (make test installs it)")
		}
		t.Skip("no redis-server")
	}
	ctx := context.Background()
	cmd, addr, err := benchproc.StartRedis(ctx, nil, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	if err := c.FunctionLoad(ctx, gcraLua).Err(); err != nil {
		t.Fatal(err)
	}
	call := func(keys ...string) string {
		t.Helper()
		got, err := c.FCall(ctx, "fgref_gcra", keys, "10000", "20000", "30000").Text()
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	var got string
	for range 4 {
		got += call("{k}a")
	}
	if got != "1110" {
		t.Errorf("four calls on one key of burst 3: %q, want 1110", got)
	}
	if got := call("{k}b", "{k}c", "{k}d", "{k}e"); got != "1111" {
		t.Errorf("one call of four keys: %q, want 1111", got)
	}
	if ttl := c.PTTL(ctx, "{k}a").Val(); ttl <= 20*time.Second || ttl > 30*time.Second {
		t.Errorf("PTTL %v, want tau + T (30s) at most, more than tau", ttl)
	}
	c.Set(ctx, "{k}bad", "12345", 0)
	if err := c.FCall(ctx, "fgref_gcra", []string{"{k}bad"}, "10000", "20000", "30000").Err(); err == nil || !strings.Contains(err.Error(), "malformed state") {
		t.Errorf("a decimal state: %v, want a malformed state error", err)
	}
}
