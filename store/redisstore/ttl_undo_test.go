package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/redisstore"
)

// TestUndoneDeleteKeepsTTL: a refund that leaves a key's state empty (a
// token bucket full again while its key lives on in its pad, a window's
// one count refunded) deletes the key; when its group is denied and undone, the key
// comes back with the TTL it had, never without one (a key no write
// touches again would then stay in Redis for good).
func TestUndoneDeleteKeepsTTL(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client()
	ctx := context.Background()
	s := newStore(t, c, redisstore.Config{Timeout: 5 * time.Second})
	defer s.Close()
	full := store.Request{Key: "undel-full", Limit: swl(1, time.Hour), Cost: 1}
	decide(t, s, time.Now(), full)
	for _, l := range []algorithms.Limit{
		tb(40, 500*time.Millisecond),
		swl(40, 500*time.Millisecond),
	} {
		t.Run(l.Algorithm.String(), func(t *testing.T) {
			key := "undel-" + l.Algorithm.String()
			rk := redisstore.StateKey(l.Algorithm, key)
			decide(t, s, time.Now(), store.Request{Key: key, Limit: l, Cost: 1})
			before := c.Get(ctx, rk).Val()
			// A unit comes back in 12.5 ms; the key lives longer (a pad, or
			// a window's end).
			time.Sleep(40 * time.Millisecond)
			if c.Exists(ctx, rk).Val() == 0 {
				t.Skip("the key expired with its state: nothing to delete")
			}
			out := decide(t, s, time.Now(), store.Request{Key: key, Limit: l, Cost: -1}, full)
			if out[1].Allowed {
				t.Fatalf("the full key's request was allowed: %+v", out)
			}
			pttl, err := c.PTTL(ctx, rk).Result()
			if err != nil {
				t.Fatal(err)
			}
			if after := c.Get(ctx, rk).Val(); after != before && pttl != -2*time.Nanosecond {
				t.Errorf("after the undone group the key holds %q, want %q", after, before)
			}
			if pttl == -1*time.Nanosecond {
				t.Fatalf("after the undone group the key has no TTL")
			}
		})
	}
}
