package storetest

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
)

// Cases under concurrency: single requests and two-key batches from many
// goroutines at once.

// testContention sends 300 concurrent single requests from 64 goroutines at
// one key with a limit of 100: exactly 100 are admitted. Calendar limits
// (per month in Jakarta) too.
func testContention(h *harness) {
	const (
		limit      = 100
		calls      = 300
		goroutines = 64
	)
	var ls []algorithms.Limit
	for _, alg := range algorithms.All() {
		ls = append(ls, algorithms.Limit{Algorithm: alg, Requests: limit, Period: time.Hour})
	}
	jakarta := h.zone("Asia/Jakarta")
	for _, alg := range windowed() {
		ls = append(ls, algorithms.Limit{Algorithm: alg, Requests: limit, Calendar: algorithms.Month, Location: jakarta})
	}
	for _, l := range ls {
		alg := l.Algorithm
		key := h.key("contention-" + alg.String() + l.Calendar.String())
		now := epoch.Add(42 * time.Millisecond)
		var admitted, next atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, goroutines)
		for range goroutines {
			wg.Go(func() {
				out := make([]algorithms.Decision, 1)
				reqs := []store.Request{{Key: key, Limit: l, Cost: 1}}
				for next.Add(1) <= calls {
					if err := h.s.Decide(context.Background(), now, reqs, out); err != nil {
						errs <- err
						return
					}
					if out[0].Allowed {
						admitted.Add(1)
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			h.t.Fatalf("%v: Decide: %v", alg, err)
		}
		if got := admitted.Load(); got != limit {
			h.t.Errorf("%v: %d concurrent calls with a limit of %d admitted %d, want exactly %d", alg, calls, limit, got, limit)
		}
		h.expectRemaining(now, l, key, 0, "after contention")
	}
}

// testBatchContention sends two-key batches in both key orders from many
// goroutines. Stores must neither deadlock nor leak partial charges: both
// keys end charged exactly by the admitted batches.
func testBatchContention(h *harness) {
	const (
		limit      = 100
		calls      = 300
		goroutines = 32
	)
	l := algorithms.Limit{Algorithm: algorithms.Compatible, Requests: limit, Period: time.Hour}
	k1, k2 := h.key("batch-1"), h.key("batch-2")
	now := epoch
	var admitted, next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			reqs := []store.Request{{Key: k1, Limit: l, Cost: 1}, {Key: k2, Limit: l, Cost: 1}}
			if g%2 == 1 {
				reqs[0], reqs[1] = reqs[1], reqs[0]
			}
			out := make([]algorithms.Decision, 2)
			for next.Add(1) <= calls {
				if err := h.s.Decide(context.Background(), now, reqs, out); err != nil {
					errs <- err
					return
				}
				if out[0].Allowed && out[1].Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		h.t.Fatalf("Decide: %v", err)
	}
	got := admitted.Load()
	if got > limit || got == 0 {
		h.t.Fatalf("admitted %d batches, want between 1 and %d", got, limit)
	}
	h.expectRemaining(now, l, k1, limit-got, "first key after batches")
	h.expectRemaining(now, l, k2, limit-got, "second key after batches")
}
