package redisstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/redisstore"
)

// BenchmarkDecide measures single-request Decide calls on a standalone
// Redis from many goroutines, over many distinct keys, with the batcher
// (default settings) and without it (BatchMaxSize 1). Decisions use Redis'
// clock, as in production. It checks afterwards that the run touched as
// many distinct keys as it claims.
func BenchmarkDecide(b *testing.B) {
	srv := redistest.StartServer(b)
	admin := srv.Client()
	const nkeys = 100_000
	keys := make([]string, nkeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("bench-user-%d", i)
	}
	// 100 per hour: every decision is an admitted charge that stays put
	// (its TTL is 36s), so the key count after the run is exact.
	l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 100, Period: time.Hour}
	for _, bc := range []struct {
		name      string
		batchSize int
		batchWait time.Duration
	}{{"unbatched", 1, 0}, {"batched", 0, 0}, {"batched-nowait", 0, -1}} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			if err := admin.FlushAll(ctx).Err(); err != nil { // our own server
				b.Fatal(err)
			}
			s, err := redisstore.New(srv.Client(), redisstore.Config{BatchMaxSize: bc.batchSize, BatchMaxWait: bc.batchWait, Timeout: time.Second})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var next atomic.Int64
			b.SetParallelism(32)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				reqs := make([]store.Request, 1)
				out := make([]algorithms.Decision, 1)
				for pb.Next() {
					reqs[0] = store.Request{Key: keys[(next.Add(1)-1)%nkeys], Limit: l, Cost: 1}
					if err := s.Decide(ctx, time.Time{}, reqs, out); err != nil {
						b.Fatal(err)
					}
					if !out[0].Allowed {
						b.Fatalf("denied: %+v", out[0])
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
			n, err := admin.DBSize(ctx).Result()
			if err != nil {
				b.Fatal(err)
			}
			if want := min(int64(b.N), nkeys); n != want {
				b.Fatalf("%d keys in Redis after %d decisions, want %d distinct keys", n, b.N, want)
			}
		})
	}
}
