package loadgen

import (
	"context"
	"sync/atomic"
	"testing"
)

// BenchmarkWorkerLoop measures what the engine adds to each request
// besides the RPC itself: choosing the key, two clock reads, the counters
// and the histogram. It must not allocate.
func BenchmarkWorkerLoop(b *testing.B) {
	for _, tc := range []struct {
		name string
		zipf float64
	}{{"uniform", 0}, {"zipf1.1", 1.1}} {
		b.Run(tc.name, func(b *testing.B) {
			var phase atomic.Int32
			phase.Store(phaseMeasure)
			var budget atomic.Int64
			budget.Store(int64(b.N))
			seen := make([]bool, 10_000)
			call := func(_ context.Context, key int) (bool, bool, error) {
				seen[key] = true
				return key%2 == 0, true, nil
			}
			pick := keyPicker(Config{Keys: len(seen), Zipf: tc.zipf}, 1, 0)
			w := new(worker)
			b.ReportAllocs()
			b.ResetTimer()
			w.run(context.Background(), call, pick, control{phase: &phase, budget: &budget})
			b.StopTimer()
			if got := w.allowed + w.denied; got != uint64(b.N) || w.hist.Count() != uint64(b.N) {
				b.Fatalf("recorded %d decisions, %d latencies; want %d", got, w.hist.Count(), b.N)
			}
			if b.N >= 100_000 {
				distinct := 0
				for _, s := range seen {
					if s {
						distinct++
					}
				}
				if distinct < 1000 {
					b.Fatalf("only %d distinct keys chosen out of %d", distinct, len(seen))
				}
			}
		})
	}
}

func TestWorkerLoopDoesNotAllocate(t *testing.T) {
	var phase atomic.Int32
	phase.Store(phaseMeasure)
	var budget atomic.Int64
	call := func(context.Context, int) (bool, bool, error) { return true, true, nil }
	pick := keyPicker(Config{Keys: 1000, Zipf: 1.5}, 1, 0)
	w := new(worker)
	allocs := testing.AllocsPerRun(10, func() {
		budget.Store(1000)
		w.run(context.Background(), call, pick, control{phase: &phase, budget: &budget})
	})
	if allocs != 0 {
		t.Fatalf("1000 requests through the worker loop allocate %v times", allocs)
	}
}
