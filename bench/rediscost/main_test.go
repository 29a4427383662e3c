package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/floodgate/floodgate/algorithms"
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
		tb      float64
		met     string
	}{
		{"token bucket at 8, at the bound", lim(algorithms.TokenBucket), 8, 30_000, 30_000, "yes"},
		{"token bucket at 8, above", lim(algorithms.TokenBucket), 8, 30_001, 30_001, "**no**"},
		{"token bucket at 1, at the bound", lim(algorithms.TokenBucket), 1, 55_000, 55_000, "yes"},
		{"token bucket at 1, above", lim(algorithms.TokenBucket), 1, 55_001, 55_001, "**no**"},
		{"sliding window within 1.3x", lim(algorithms.SlidingWindow), 8, 39_000, 30_000, "yes"},
		{"sliding window beyond 1.3x", lim(algorithms.SlidingWindow), 8, 39_001, 30_000, "**no**"},
		{"log within 2x", lim(algorithms.SlidingWindowLog), 8, 60_000, 30_000, "yes"},
		{"log beyond 2x", lim(algorithms.SlidingWindowLog), 8, 60_001, 30_000, "**no**"},
		{"the reference has none", subject{ref: "fgref_gcra"}, 8, 1, 30_000, "–"},
		{"no token bucket row", lim(algorithms.FixedWindow), 8, 1, 0, "–"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, met := targetOf(&row{sub: tc.sub, perCall: tc.perCall, instr: tc.instr}, tc.tb); met != tc.met {
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
