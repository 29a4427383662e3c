package memstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
)

// benchLimit never denies within a benchmark's run, so every iteration
// takes the charging (writing) path.
func benchLimit(alg algorithms.Algorithm) algorithms.Limit {
	if alg == algorithms.SlidingWindowLog {
		return algorithms.Limit{Algorithm: alg, Requests: algorithms.MaxLogRequests, Period: time.Hour}
	}
	return algorithms.Limit{Algorithm: alg, Requests: 100_000_000, Period: time.Hour}
}

// benchStore is a store holding n distinct keys, each charged once under
// l at t0; it fails b unless all n are stored.
func benchStore(b *testing.B, n int, l algorithms.Limit) (*Store, []string) {
	b.Helper()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("tenant-%d:user:%d", i%97, i)
	}
	// Per-shard caps fill unevenly: leave room so nothing is evicted.
	s := New(Config{MaxKeys: 2 * n, SweepInterval: -1})
	reqs := make([]store.Request, 1)
	out := make([]algorithms.Decision, 1)
	for _, k := range keys {
		reqs[0] = store.Request{Key: k, Limit: l, Cost: 1}
		if err := s.Decide(context.Background(), t0, reqs, out); err != nil {
			b.Fatal(err)
		}
	}
	if got := s.Len(); got != n {
		b.Fatalf("store holds %d keys, want %d distinct keys", got, n)
	}
	return s, keys
}

// runDecide runs Decide in parallel, each call a batch of `batch`
// consecutive keys, goroutines starting at spread-out offsets.
func runDecide(b *testing.B, s *Store, keys []string, l algorithms.Limit, batch int) {
	b.Helper()
	var start, denied atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		i := int(start.Add(1)*7919) % len(keys)
		reqs := make([]store.Request, batch)
		out := make([]algorithms.Decision, batch)
		for j := range reqs {
			reqs[j] = store.Request{Limit: l, Cost: 1}
		}
		for pb.Next() {
			for j := range reqs {
				reqs[j].Key = keys[i]
				if i++; i == len(keys) {
					i = 0
				}
			}
			if err := s.Decide(ctx, t0, reqs, out); err != nil {
				b.Error(err)
				return
			}
			if !out[0].Allowed {
				denied.Add(1)
			}
		}
	})
	b.StopTimer()
	if d := denied.Load(); d != 0 {
		b.Fatalf("%d calls denied; the benchmark must measure the charging path", d)
	}
	if got := s.Len(); got != len(keys) {
		b.Fatalf("store holds %d keys after the run, want %d", got, len(keys))
	}
}

// BenchmarkDecide measures single-request Decide calls spread over many
// distinct keys (10,000 and 1,000,000), one hot key under contention, and
// three-request batches, all at a fixed now.
func BenchmarkDecide(b *testing.B) {
	for _, n := range []int{10_000, 1_000_000} {
		algs := algorithms.All()
		if n > 10_000 {
			algs = algs[:1]
		}
		for _, alg := range algs {
			l := benchLimit(alg)
			var s *Store
			var keys []string
			b.Run(fmt.Sprintf("keys=%d/%v", n, alg), func(b *testing.B) {
				if s == nil {
					s, keys = benchStore(b, n, l)
				}
				runDecide(b, s, keys, l, 1)
			})
			if s != nil {
				s.Close()
			}
		}
	}

	b.Run("hotkey/token_bucket", func(b *testing.B) {
		l := benchLimit(algorithms.TokenBucket)
		s, keys := benchStore(b, 1, l)
		defer s.Close()
		runDecide(b, s, keys, l, 1)
	})

	var s *Store
	var keys []string
	l := benchLimit(algorithms.TokenBucket)
	b.Run("batch=3/keys=10000/token_bucket", func(b *testing.B) {
		if s == nil {
			s, keys = benchStore(b, 10_000, l)
		}
		runDecide(b, s, keys, l, 3)
	})
	if s != nil {
		s.Close()
	}
}

// BenchmarkBytesPerKey reports the memory of 100,000 token bucket keys as
// a bytes/key metric.
func BenchmarkBytesPerKey(b *testing.B) {
	var per float64
	for range b.N {
		per = bytesPerKey(b, benchLimit(algorithms.TokenBucket), 100_000)
	}
	b.ReportMetric(per, "bytes/key")
}
