package e2e

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/redistest"
)

// TestSettleOnRedis: the binary settles on a standalone Redis and on a
// Redis Cluster: usage above the reservation goes into debt and the key's
// checks are denied; 20 concurrent retries of one settle charge once; and
// --settle-window reaches the store: after it, the same idempotency key
// charges again.
func TestSettleOnRedis(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) *proc
	}{
		{"standalone", func(t *testing.T) *proc {
			r := redistest.StartServer(t)
			return startServe(t, "--redis-url", "redis://"+r.Addr(), "--redis-timeout", "2s", "--settle-window", "1s")
		}},
		{"cluster", func(t *testing.T) *proc {
			cl := redistest.StartCluster(t, 3, 0)
			return startServe(t, "--redis-mode", "cluster", "--redis-url", clusterURL(cl), "--redis-timeout", "2s", "--settle-window", "1s")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.start(t).Client(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			tb := floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET
			day := &floodgatev1.Limit{Requests: 1000, Period: durationpb.New(24 * time.Hour)}
			check := &floodgatev1.CheckRequest{Key: "tenant:a", Algorithm: tb, Cost: 300, Source: &floodgatev1.CheckRequest_Limit{Limit: day}}
			if r, err := c.Check(ctx, check); err != nil || !r.Allowed {
				t.Fatalf("reserve: %v, %v", r, err)
			}
			settle := &floodgatev1.SettleRequest{Key: "tenant:a", Algorithm: tb, Reserved: 300, Actual: 1500, IdempotencyKey: "req-1", Source: &floodgatev1.SettleRequest_Limit{Limit: day}}
			r, err := c.Settle(ctx, settle)
			if err != nil || r.Debt != 500 || r.Duplicate || r.Degraded {
				t.Fatalf("settle: %v, %v; want 500 owed", r, err)
			}
			check.Cost = 1
			if r, err := c.Check(ctx, check); err != nil || r.Allowed {
				t.Fatalf("check in debt: %v, %v; want denied", r, err)
			}
			// 20 concurrent retries of another settle: one charge.
			again := &floodgatev1.SettleRequest{Key: "tenant:b", Algorithm: tb, Actual: 7, IdempotencyKey: "req-2", Source: settle.Source}
			var wg sync.WaitGroup
			var charged, failed atomic.Int32
			for range 20 {
				wg.Go(func() {
					r, err := c.Settle(ctx, again)
					switch {
					case err != nil || r.Degraded:
						failed.Add(1)
					case !r.Duplicate:
						charged.Add(1)
					}
				})
			}
			wg.Wait()
			if charged.Load() != 1 || failed.Load() != 0 {
				t.Fatalf("20 retries: %d charged, %d failed; want 1, 0", charged.Load(), failed.Load())
			}
			// Past --settle-window (1s) the record is gone: it charges again.
			time.Sleep(1200 * time.Millisecond)
			r, err = c.Settle(ctx, again)
			if err != nil || r.Duplicate || r.Remaining != 1000-14 {
				t.Fatalf("after the settle window: %v, %v; want a second charge (986 left)", r, err)
			}
		})
	}
}
