package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/store"
)

// TestRollingUpgradeState: replicas of the previous version and of this
// one can share a Redis. For each algorithm whose state kept its key,
// this version writes byte for byte the state the previous version wrote
// for the same decision (the strings below are what it wrote: 10 a
// minute, cost 3 at 1,780,000,000,123 ms), so an old replica reads a new
// state; the fixed window's adds its key's expiry in C, which no
// version's fixed window reads, so an old replica reads the same window
// and count. And a state the old version wrote decides here exactly as
// one this version wrote (TestFixedWindowExpiry: its TTL is then set, not
// kept). The token bucket's state moved to a key of its own: this
// version neither reads nor writes the previous version's key.
func TestRollingUpgradeState(t *testing.T) {
	ctx := context.Background()
	srv := redistest.StartServer(t)
	c := srv.Client()
	s, err := New(c, Config{ClientTime: true, KeepExtra: time.Hour, BatchMaxSize: 1, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.UnixMilli(1_780_000_000_123)
	tests := []struct {
		alg algorithms.Algorithm
		key string
		old string
	}{
		{algorithms.SlidingWindow, "fg:sw:{up}", "(\xc0Ci\xf9\x02\x03"},
		{algorithms.FixedWindow, "fg:fw:{up}", "(\xc0Ci\xf9\x02\x03"},
		{algorithms.LeakyBucket, "fg:lb:{up}", "\x01\x01\xcb&j\xf9\x02"},
	}
	for _, tc := range tests {
		t.Run(tc.alg.String(), func(t *testing.T) {
			l := algorithms.Limit{Algorithm: tc.alg, Requests: 10, Period: time.Minute}
			decide := func(at time.Time, cost int64) algorithms.Decision {
				t.Helper()
				out := make([]algorithms.Decision, 1)
				if err := s.Decide(ctx, at, []store.Request{{Key: "up", Limit: l, Cost: cost}}, out); err != nil {
					t.Fatal(err)
				}
				return out[0]
			}
			c.Del(ctx, tc.key)
			decide(now, 3)
			got, err := c.Get(ctx, tc.key).Result()
			if tc.alg == algorithms.FixedWindow && err == nil {
				mine, theirs := decodeCounterState(t, tc.alg, got), decodeCounterState(t, tc.alg, tc.old)
				if mine.A != theirs.A || mine.B != theirs.B || theirs.C != 0 || mine.C != 60_000+time.Hour.Milliseconds() {
					t.Fatalf("this version wrote %q (%+v), the previous one %q (%+v): want its window and count, and C the key's expiry (the window's end plus KeepExtra, ms after its start)", got, mine, tc.old, theirs)
				}
			} else if err != nil || got != tc.old {
				t.Fatalf("this version wrote %q (%v), the previous one %q", got, err, tc.old)
			}
			later := now.Add(1500 * time.Millisecond)
			mine := decide(later, 2)
			if err := c.Set(ctx, tc.key, tc.old, time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
			if theirs := decide(later, 2); theirs != mine {
				t.Fatalf("after the previous version's state: %+v; after this version's: %+v", theirs, mine)
			}
		})
	}
	t.Run("token bucket apart", func(t *testing.T) {
		const old = "\x1a\x10\xa4\x00p\x17{\xe0i\xf9\x02" // 7 tokens of 10 a minute
		if err := c.Set(ctx, "fg:tb:{apart}", old, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Minute}
		out := make([]algorithms.Decision, 1)
		if err := s.Decide(ctx, now, []store.Request{{Key: "apart", Limit: l, Cost: 3}}, out); err != nil {
			t.Fatal(err)
		}
		if out[0].Remaining != 7 {
			t.Fatalf("%+v: want 7 remaining, from a full bucket of its own", out[0])
		}
		if got, err := c.Get(ctx, "fg:tb:{apart}").Result(); err != nil || got != old {
			t.Fatalf("the previous version's key holds %q (%v), want %q untouched", got, err, old)
		}
		if n, err := c.Exists(ctx, KeyName(DefaultPrefix, algorithms.TokenBucket, "apart")).Result(); err != nil || n != 1 {
			t.Fatalf("this version's key: %d, %v", n, err)
		}
	})
}
