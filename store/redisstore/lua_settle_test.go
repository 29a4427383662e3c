package redisstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/redistest"
)

// TestSettleLuaErrors: the settle script refuses malformed calls with an
// error reply, writing nothing (neither the state nor the record).
func TestSettleLuaErrors(t *testing.T) {
	ctx := context.Background()
	c := redistest.StartServer(t).Client()
	l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 5, Period: time.Second}
	h := header{nowMs: 1, keepMs: 1}
	good := appendRequest(appendHeader(nil, h), l, 3, false, algorithms.Debt, h)
	noDebt := appendRequest(appendHeader(nil, h), l, 3, false, 0, h)
	p := header{nowMs: 1, probe: true}
	probe := appendRequest(appendHeader(nil, p), l, 3, false, algorithms.Debt, p)
	ks := []string{"s:{a}", "s:{a}/r"}
	for _, tc := range []struct {
		name string
		keys []string
		args []any
	}{
		{"no ARGV", ks, nil},
		{"one key", ks[:1], []any{good, "fp", "1000"}},
		{"no record TTL", ks, []any{good, "fp"}},
		{"zero record TTL", ks, []any{good, "fp", "0"}},
		{"not debt", ks, []any{noDebt, "fp", "1000"}},
		{"a probe", ks, []any{probe, "fp", "1000"}},
		{"two requests", ks, []any{append(append([]byte(nil), good...), good[hdrLen:]...), "fp", "1000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := settleLua.Run(ctx, c, tc.keys, tc.args...).Err()
			if err == nil || !strings.Contains(err.Error(), "bad settle arguments") {
				t.Fatalf("error %v, want bad settle arguments", err)
			}
			if n, _ := c.Exists(ctx, ks...).Result(); n != 0 {
				t.Fatalf("a refused call wrote %d keys", n)
			}
		})
	}
	// A good call, then the same record with another fingerprint.
	if err := settleLua.Run(ctx, c, ks, good, "fp", "1000").Err(); err != nil {
		t.Fatal(err)
	}
	if err := settleLua.Run(ctx, c, ks, good, "other", "1000").Err(); err == nil || !strings.Contains(err.Error(), "settle conflict") {
		t.Fatalf("conflict: %v", err)
	}
}
