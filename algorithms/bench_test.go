package algorithms_test

import (
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
)

// BenchmarkDecide measures one decision in steady state: benchKeys distinct
// keys, each asked twice as often as its limit admits, so about half the
// decisions are allowed and half denied. The clock is computed from the
// iteration (1ms per decision), never read. Each key's state is the state
// its previous decision returned, as a store would keep it.
func BenchmarkDecide(b *testing.B) {
	const (
		benchKeys = 50 // with 1ms a decision: 20 requests/s per key
		requests  = 10 // per second: half of what each key asks
	)
	for _, alg := range algorithms.All() {
		b.Run(alg.String(), func(b *testing.B) {
			l := algorithms.Limit{Algorithm: alg, Requests: requests, Period: time.Second}
			if err := l.Validate(); err != nil {
				b.Fatal(err)
			}
			states := make([]algorithms.State, benchKeys)
			now := epoch.UnixMilli()
			// Warm up: a second of traffic, so every key starts in steady
			// state with a live window or log.
			for i := range 1000 * benchKeys {
				k := i % benchKeys
				states[k], _ = algorithms.DecideAt(l, states[k], algorithms.Request{NowMs: now + int64(i), Cost: 1})
			}
			now += 1000 * benchKeys
			allowed := 0
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				k := i % benchKeys
				var d algorithms.Decision
				states[k], d = algorithms.DecideAt(l, states[k], algorithms.Request{NowMs: now + int64(i), Cost: 1})
				if d.Allowed {
					allowed++
				}
			}
			b.StopTimer()
			// Check that the benchmark measures the mix it claims.
			frac := float64(allowed) / float64(b.N)
			b.ReportMetric(frac, "allowed/op")
			if b.N >= 10*benchKeys*requests && (frac < 0.4 || frac > 0.6) {
				b.Fatalf("%d of %d decisions allowed (%.2f); want about half", allowed, b.N, frac)
			}
		})
	}
}

// BenchmarkDecideParallel is BenchmarkDecide from every P at once, each
// goroutine with its own keys: the algorithms share nothing, so it should
// scale with GOMAXPROCS.
func BenchmarkDecideParallel(b *testing.B) {
	const benchKeys = 50
	for _, alg := range algorithms.All() {
		b.Run(alg.String(), func(b *testing.B) {
			l := algorithms.Limit{Algorithm: alg, Requests: 10, Period: time.Second}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				states := make([]algorithms.State, benchKeys)
				now := epoch.UnixMilli()
				for i := 0; pb.Next(); i++ {
					k := i % benchKeys
					states[k], _ = algorithms.DecideAt(l, states[k], algorithms.Request{NowMs: now + int64(i), Cost: 1})
				}
			})
		})
	}
}
