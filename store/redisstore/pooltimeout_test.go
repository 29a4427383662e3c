package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/store"
)

// TestPoolTimeout: with the client's only connection held elsewhere, a
// Decide waits out PoolTimeout and fails with go-redis' ErrPoolTimeout
// wrapped in store.ErrUnavailable, batched or not (an exhausted pool is a
// Redis too slow to serve, so failure modes answer and the breaker
// counts it).
func TestPoolTimeout(t *testing.T) {
	srv := redistest.StartServer(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		batchSize int
	}{{"unbatched", 1}, {"batched", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			c := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 1, PoolTimeout: 50 * time.Millisecond, MaxRetries: -1})
			defer c.Close()
			held := c.Conn() // takes the pool's one connection on first use
			defer held.Close()
			if err := held.Ping(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			cfg := testConfig()
			cfg.BatchMaxSize = tc.batchSize
			s := newStore(t, c, cfg)
			defer s.Close()
			l := limit(algorithms.FixedWindow, 5)
			out := make([]algorithms.Decision, 1)
			err := s.Decide(ctx, t0, []store.Request{{Key: "k", Limit: l, Cost: 1}}, out)
			if !errors.Is(err, redis.ErrPoolTimeout) || !errors.Is(err, store.ErrUnavailable) {
				t.Fatalf("Decide with the pool exhausted: %v, want ErrPoolTimeout wrapped in ErrUnavailable", err)
			}
			if err := held.Close(); err != nil { // the connection goes back to the pool
				t.Fatal(err)
			}
			if err := s.Decide(ctx, t0, []store.Request{{Key: "k", Limit: l, Cost: 1}}, out); err != nil || !out[0].Allowed {
				t.Fatalf("Decide with the connection back: %+v, %v", out[0], err)
			}
		})
	}
}
