package storetest

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
)

// settler is the store under test as a store.Settler; the test fails if
// it is not one.
func (h *harness) settler() store.Settler {
	h.t.Helper()
	st, ok := h.s.(store.Settler)
	if !ok {
		h.t.Fatalf("%T is not a store.Settler", h.s)
	}
	return st
}

// settle runs one Settle and fails the test on an error.
func (h *harness) settle(now time.Time, s store.Settlement) store.SettleResult {
	h.t.Helper()
	r, err := h.settler().Settle(context.Background(), now, s)
	if err != nil {
		h.t.Fatalf("Settle(%+v): %v", s, err)
	}
	return r
}

// checkSettle compares a settlement's answer with the model's.
func (h *harness) checkSettle(what string, got store.SettleResult, want algorithms.Decision, dup bool) {
	h.t.Helper()
	g := got.Decision
	if got.Duplicate != dup || !g.Allowed || g.Limit != want.Limit || g.Remaining != want.Remaining || g.RetryAfter != want.RetryAfter ||
		g.ResetAfter != want.ResetAfter || g.Debt != want.Debt || g.Unrecorded != want.Unrecorded {
		h.t.Errorf("%s: got %s debt %d unrecorded %d duplicate %v\n want %s debt %d unrecorded %d duplicate %v",
			what, fmtDecision(g), g.Debt, g.Unrecorded, got.Duplicate, fmtDecision(want), want.Debt, want.Unrecorded, dup)
	}
}

// testSettle: a reserve-then-settle flow on every algorithm, checked
// against algorithms.Settle: the usage above the reservation goes into
// debt (checks denied with the exact wait), a retry with the same
// idempotency key charges nothing and answers duplicate, the key reused
// with other numbers is refused, a refund gives back the unused estimate,
// and a Decide in Debt mode charges past the capacity.
func testSettle(h *harness) {
	for name, l := range settleLimits(h) {
		alg := l.Algorithm
		key := h.key("settle-" + name)
		m := newModel()
		now := epoch.Add(100 * time.Millisecond)
		c := l.Capacity()
		// Reserve 2, use 2 + capacity: a debt (the log fills up instead).
		h.decideBoth(m, now, "reserve", store.Request{Key: key, Limit: l, Cost: 2})
		s := store.Settlement{Key: key, Limit: l, Reserved: 2, Actual: 2 + c, IdempotencyKey: "call-1"}
		want := m.settle(now, l, key, s.Delta())
		h.checkSettle("settle", h.settle(now, s), want, false)
		if !alg.Facts().Log && want.Debt == 0 { // a log never owes
			h.t.Errorf("%v: a settle beyond the capacity left no debt", alg)
		}
		// The retry charges nothing.
		now = now.Add(30 * time.Millisecond)
		h.checkSettle("retry", h.settle(now, s), m.settle(now, l, key, 0), true)
		// A check is denied until the debt is repaid, exactly.
		d := h.decideBoth(m, now, "check in debt", store.Request{Key: key, Limit: l, Cost: 1})
		if d[0].Allowed {
			h.t.Errorf("%v: a check passed in debt", alg)
		}
		// The same idempotency key with other numbers is refused.
		other := s
		other.Actual++
		if _, err := h.settler().Settle(context.Background(), now, other); !errors.Is(err, store.ErrSettleConflict) {
			h.t.Errorf("%v: reused idempotency key: got %v, want ErrSettleConflict", alg, err)
		}
		// A refund of an unused estimate, never above the capacity.
		later := now.Add(5 * time.Second)
		if l.Calendar != algorithms.NoCalendar {
			// A calendar period's debt is not carried past its end, and
			// a window's previous period may weigh on the next:
			// two months on, the key is full again.
			later = now.AddDate(0, 2, 0)
		}
		r := store.Settlement{Key: key, Limit: l, Reserved: c, Actual: 0, IdempotencyKey: "call-2"}
		h.checkSettle("refund", h.settle(later, r), m.settle(later, l, key, -c), false)
		h.expectFull(later, l, key, "after the refund")
		// A dry run of a debt charge past the capacity: allowed, nothing
		// written.
		dry := store.Request{Key: key, Limit: l, Cost: c + 5, Mode: algorithms.Debt, DryRun: true}
		h.decideBoth(m, later, "dry debt charge", dry)
		h.expectFull(later, l, key, "after a dry debt charge")
		// Decide in Debt mode (Envoy's after-the-fact descriptors).
		h.decideBoth(m, later, "debt charge", store.Request{Key: key, Limit: l, Cost: c + 3, Mode: algorithms.Debt})
		h.decideBoth(m, later, "check after", store.Request{Key: key, Limit: l, Cost: 1})
		// Bad settlements are refused, naming the problem.
		for _, bad := range []store.Settlement{
			{Key: key, Limit: l, Actual: 1},
			{Key: key, Limit: l, Actual: -1, IdempotencyKey: "x"},
			{Key: key, Limit: l, Reserved: -1, IdempotencyKey: "x"},
			{Key: key, Limit: l, Actual: 1, IdempotencyKey: string(make([]byte, store.MaxIdempotencyKeyLen+1))},
		} {
			if _, err := h.settler().Settle(context.Background(), later, bad); !errors.Is(err, store.ErrInvalid) {
				h.t.Errorf("%v: Settle(%+v): got %v, want ErrInvalid", alg, bad, err)
			}
		}
	}
}

// settleLimits yields the suite's limit of every algorithm (limits), and
// calendar limits of both windows (a month in Asia/Jakarta), by name.
func settleLimits(h *harness) iter.Seq2[string, algorithms.Limit] {
	return func(yield func(string, algorithms.Limit) bool) {
		for alg, l := range limits() {
			if !yield(alg.String(), l) {
				return
			}
		}
		jakarta := h.zone("Asia/Jakarta")
		for _, alg := range windowed() {
			if !yield("calendar-"+alg.String(), algorithms.Limit{Algorithm: alg, Requests: 5, Calendar: algorithms.Month, Location: jakarta}) {
				return
			}
		}
	}
}

// testSettleConcurrentRetries: 20 goroutines send the same settlement at
// once (a client retrying on timeouts): it is charged once, the others
// answer duplicate.
func testSettleConcurrentRetries(h *harness) {
	for name, l := range settleLimits(h) {
		alg := l.Algorithm
		key := h.key("settle-race-" + name)
		now := epoch.Add(time.Second)
		s := store.Settlement{Key: key, Limit: l, Actual: 3, IdempotencyKey: "once"}
		var wg sync.WaitGroup
		var mu sync.Mutex
		firsts := 0
		errs := make(chan error, 20)
		for range 20 {
			wg.Go(func() {
				r, err := h.settler().Settle(context.Background(), now, s)
				if err != nil {
					errs <- err
					return
				}
				if !r.Duplicate {
					mu.Lock()
					firsts++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			h.t.Errorf("%v: concurrent settle: %v", alg, err)
		}
		if firsts != 1 {
			h.t.Errorf("%v: %d of 20 concurrent retries charged, want 1", alg, firsts)
		}
		h.expectRemaining(now, l, key, l.Capacity()-3, fmt.Sprintf("%v after 20 retries of one settle of 3", alg))
	}
}
