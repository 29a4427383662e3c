package redisstore

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/store"
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

// TestDecodeSettleReply: a settle reply is a decide record, then debt,
// unrecorded and duplicate; every other shape is an error wrapping
// errReply, never a panic.
func TestDecodeSettleReply(t *testing.T) {
	reply := func(allowed, dup byte, f ...int64) string { // remaining, retry, reset, ttl, wait, debt, unrecorded
		b := binary.LittleEndian.AppendUint64(nil, uint64(4*f[0]+int64(allowed)))
		for _, v := range f[1:] {
			b = binary.LittleEndian.AppendUint64(b, uint64(v))
		}
		return string(append(b, dup))
	}
	ok := reply(1, 1, 2, 1500, 3000, 4000, 0, 3, 7)
	got, err := decodeSettleReply(ok, 5)
	want := store.SettleResult{
		Decision: algorithms.Decision{
			Allowed: true, Limit: 5, Remaining: 2, RetryAfter: 1500 * time.Millisecond,
			ResetAfter: 3 * time.Second, TTL: 4 * time.Second, Debt: 3, Unrecorded: 7,
		},
		Duplicate: true,
	}
	if err != nil || got != want {
		t.Fatalf("got %+v, %v; want %+v", got, err, want)
	}
	for name, r := range map[string]any{
		"not a string":        int64(1),
		"nil":                 nil,
		"empty":               "",
		"no tail":             ok[:40],
		"short":               ok[:len(ok)-1],
		"long":                ok + "x",
		"denied":              reply(0, 0, 2, 1500, 3000, 4000, 0, 3, 7),
		"negative debt":       reply(1, 0, 2, 1500, 3000, 4000, 0, -1, 7),
		"negative unrecorded": reply(1, 0, 2, 1500, 3000, 4000, 0, 3, -1),
		"duplicate 2":         reply(1, 2, 2, 1500, 3000, 4000, 0, 3, 7),
		"negative reset":      reply(1, 0, 2, 1500, -1, 4000, 0, 3, 7),
	} {
		if _, err := decodeSettleReply(r, 5); !errors.Is(err, errReply) {
			t.Errorf("%s: error %v, want errReply", name, err)
		}
	}
}
