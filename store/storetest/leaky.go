package storetest

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
)

// testLeakyQueue: for every algorithm that waits (algorithms.Facts.Waits),
// concurrent callers on one key at one instant get distinct starts exactly one slot apart (50 callers
// at 20/s start 50 ms apart); a full queue admits exactly its size; in
// NoWait mode exactly one caller of an instant is admitted.
func testLeakyQueue(h *harness) {
	for _, alg := range algorithms.Which(func(f algorithms.Facts) bool { return f.Waits }) {
		testQueue(h, alg)
	}
}

// testQueue is testLeakyQueue of alg.
func testQueue(h *harness, alg algorithms.Algorithm) {
	const callers = 50
	now := epoch.Add(7 * time.Millisecond)
	run := func(key string, l algorithms.Limit, mode algorithms.Mode) (starts []time.Duration, denied []algorithms.Decision) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				out := make([]algorithms.Decision, 1)
				err := h.s.Decide(context.Background(), now, []store.Request{{Key: key, Limit: l, Cost: 1, Mode: mode}}, out)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					h.t.Errorf("Decide: %v", err)
				case out[0].Allowed:
					starts = append(starts, out[0].Wait)
				default:
					denied = append(denied, out[0])
				}
			})
		}
		wg.Wait()
		slices.Sort(starts)
		return starts, denied
	}
	slot := 50 * time.Millisecond

	l := algorithms.Limit{Algorithm: alg, Requests: 20, Period: time.Second, Burst: 100}
	starts, denied := run(h.key("queue-all-"+alg.String()), l, 0)
	if len(starts) != callers || len(denied) != 0 {
		h.t.Fatalf("queue of 100: %d admitted, %d denied, want all %d admitted", len(starts), len(denied), callers)
	}
	for i, w := range starts {
		if w != time.Duration(i)*slot {
			h.t.Fatalf("start %d waits %v, want %v (every start one 50ms slot after the one before): %v", i, w, time.Duration(i)*slot, starts)
		}
	}

	l.Burst = 10
	starts, denied = run(h.key("queue-full-"+alg.String()), l, 0)
	if len(starts) != 10 || len(denied) != callers-10 {
		h.t.Fatalf("queue of 10: %d admitted, %d denied, want exactly 10 admitted", len(starts), len(denied))
	}
	for i, w := range starts {
		if w != time.Duration(i)*slot {
			h.t.Errorf("queue of 10: start %d waits %v, want %v", i, w, time.Duration(i)*slot)
		}
	}
	for _, d := range denied {
		if d.RetryAfter != slot || d.Wait != 0 {
			h.t.Errorf("queue of 10, denied: RetryAfter %v Wait %v, want %v (until the first place frees) and 0", d.RetryAfter, d.Wait, slot)
			break
		}
	}

	l.Burst = 0
	starts, denied = run(h.key("queue-nowait-"+alg.String()), l, algorithms.NoWait)
	if len(starts) != 1 || starts[0] != 0 || len(denied) != callers-1 {
		h.t.Fatalf("NoWait: admitted %v and %d denied, want exactly one admitted, with no wait", starts, len(denied))
	}
	if d := denied[0]; d.RetryAfter != slot {
		h.t.Errorf("NoWait, denied: RetryAfter %v, want %v", d.RetryAfter, slot)
	}

	// A give-back frees no slot (it may be a middle one): the next start
	// is still a slot after the last, never beside it.
	key := h.key("queue-refund-" + alg.String())
	l.Burst = 100
	for range 3 {
		h.decide(now, store.Request{Key: key, Limit: l, Cost: 1})
	}
	h.decide(now, store.Request{Key: key, Limit: l, Cost: -1})
	if got := h.peek(now, l, key); got.Wait != 3*slot || !got.Allowed {
		h.t.Errorf("after 3 admitted and 1 given back: peek %+v, want Wait %v", got, 3*slot)
	}
}
