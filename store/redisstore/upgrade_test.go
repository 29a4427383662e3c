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
// state, and a state the old version wrote decides here exactly as one
// this version wrote. The token bucket's state and the fixed window's
// counts moved to keys of their own: this version neither reads nor
// writes the previous version's keys.
func TestRollingUpgradeState(t *testing.T) {
	ctx := context.Background()
	srv := redistest.StartServer(t)
	c := srv.Client()
	s, err := New(c, Config{ClientTime: true, BatchMaxSize: 1, Timeout: 5 * time.Second})
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
			if err != nil || got != tc.old {
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
	for _, tc := range []struct {
		alg      algorithms.Algorithm
		key, old string // the previous version's key and state: 3 of 10 a minute spent
		written  string // this version's key
	}{
		{algorithms.TokenBucket, "fg:tb:{apart}", "\x1a\x10\xa4\x00p\x17{\xe0i\xf9\x02", KeyName(DefaultPrefix, algorithms.TokenBucket, "apart")},
		{algorithms.FixedWindow, "fg:fw:{apart}", "(\xc0Ci\xf9\x02\x03", windowKey(KeyName(DefaultPrefix, algorithms.FixedWindow, "apart"), now.UnixMilli()-now.UnixMilli()%60_000+60_000)},
	} {
		t.Run(tc.alg.String()+" apart", func(t *testing.T) {
			if err := c.Set(ctx, tc.key, tc.old, time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
			l := algorithms.Limit{Algorithm: tc.alg, Requests: 10, Period: time.Minute}
			out := make([]algorithms.Decision, 1)
			if err := s.Decide(ctx, now, []store.Request{{Key: "apart", Limit: l, Cost: 3}}, out); err != nil {
				t.Fatal(err)
			}
			if out[0].Remaining != 7 {
				t.Fatalf("%+v: want 7 remaining, counted apart from the previous version's", out[0])
			}
			if got, err := c.Get(ctx, tc.key).Result(); err != nil || got != tc.old {
				t.Fatalf("the previous version's key holds %q (%v), want %q untouched", got, err, tc.old)
			}
			if n, err := c.Exists(ctx, tc.written).Result(); err != nil || n != 1 {
				t.Fatalf("this version's key %s: %d, %v", tc.written, n, err)
			}
		})
	}
}
