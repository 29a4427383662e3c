package storetest

import (
	"fmt"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
)

// Cases on costs: dry runs, peeks, refunds and costs above the capacity.

// testDryRun: a DryRun decides like a charge but writes nothing.
func testDryRun(h *harness) {
	for alg, l := range limits() {
		key := h.key("dry-" + alg.String())
		now := epoch.Add(250 * time.Millisecond)
		c := l.Capacity()

		d := h.decide(now, store.Request{Key: key, Limit: l, Cost: 2, DryRun: true})[0]
		if !d.Allowed || d.Remaining != c-2 {
			h.t.Errorf("%v dry run of 2 on a fresh key: %s, want allowed with Remaining %d", alg, fmtDecision(d), c-2)
		}
		h.expectFull(now, l, key, "after a dry run")

		h.decide(now, store.Request{Key: key, Limit: l, Cost: c - 1})
		d = h.decide(now, store.Request{Key: key, Limit: l, Cost: 2, DryRun: true})[0]
		if d.Allowed || d.RetryAfter <= 0 {
			h.t.Errorf("%v dry run of 2 with 1 left: %s, want a deny with a positive RetryAfter", alg, fmtDecision(d))
		}
		d = h.decide(now, store.Request{Key: key, Limit: l, Cost: -1, DryRun: true})[0]
		if want := refunded(l, 1, 1); !d.Allowed || d.Remaining != want {
			h.t.Errorf("%v dry refund of 1 with 1 left: %s, want allowed with Remaining %d", alg, fmtDecision(d), want)
		}
		h.expectRemaining(now, l, key, 1, "after dry runs on a spent key")
	}
}

// testPeekAndRefund: cost 0 never changes anything; a negative cost gives
// units back, never above the capacity; where the algorithm waits, a
// give-back frees nothing.
func testPeekAndRefund(h *harness) {
	for alg, l := range limits() {
		key := h.key("refund-" + alg.String())
		m := newModel()
		now := epoch.Add(700 * time.Millisecond)
		c := l.Capacity()
		run := func(what string, cost int64) algorithms.Decision {
			h.t.Helper()
			return h.decideBoth(m, now, fmt.Sprintf("%v %s", alg, what), store.Request{Key: key, Limit: l, Cost: cost})[0]
		}
		run("spend 3", 3)
		for i := range 5 {
			if d := run(fmt.Sprintf("peek %d", i), 0); d.Remaining != c-3 {
				h.t.Errorf("%v peek %d: Remaining %d, want %d", alg, i, d.Remaining, c-3)
			}
		}
		if d, want := run("refund 2", -2), refunded(l, c-3, 2); !d.Allowed || d.Remaining != want {
			h.t.Errorf("%v refund 2 after spending 3: %s, want allowed with Remaining %d", alg, fmtDecision(d), want)
		}
		if d, want := run("refund 100", -100), refunded(l, c-3, 100); !d.Allowed || d.Remaining != want {
			h.t.Errorf("%v refund far above capacity: %s, want Remaining %d (at most the capacity)", alg, fmtDecision(d), want)
		}
		if l.Algorithm.Facts().Waits {
			continue // nothing was freed: the rest of the queue is in use
		}
		if d := run("spend all", c); !d.Allowed || d.Remaining != 0 {
			h.t.Errorf("%v spend the capacity after a large refund: %s, want allowed with Remaining 0", alg, fmtDecision(d))
		}
		if d := run("one more", 1); d.Allowed {
			h.t.Errorf("%v a refund above capacity was kept: one more unit was admitted", alg)
		}
	}
}

// refunded is Remaining after a refund of n with left remaining: at most
// the capacity; a queue's give-back (an algorithm that waits) frees
// nothing (it cannot say which of the queue's slots are its own, see
// algorithms.Decide).
func refunded(l algorithms.Limit, left, n int64) int64 {
	if l.Algorithm.Facts().Waits {
		return left
	}
	return min(left+n, l.Capacity())
}

// testCostAboveCapacity: a cost that can never fit is denied with
// RetryAfter Never and charges nothing, alone or in a batch.
func testCostAboveCapacity(h *harness) {
	for alg, l := range limits() {
		key, other := h.key("huge-"+alg.String()), h.key("huge-other-"+alg.String())
		now := epoch.Add(9 * time.Second)
		d := h.decide(now, store.Request{Key: key, Limit: l, Cost: l.Capacity() + 1})[0]
		if d.Allowed || d.RetryAfter != algorithms.Never || d.Remaining != l.Capacity() {
			h.t.Errorf("%v cost capacity+1: %s, want denied, RetryAfter Never, Remaining %d", alg, fmtDecision(d), l.Capacity())
		}
		h.decide(now, store.Request{Key: key, Limit: l, Cost: 1})
		out := h.decide(now,
			store.Request{Key: other, Limit: l, Cost: 1},
			store.Request{Key: key, Limit: l, Cost: 1 << 40})
		if !out[0].Allowed || out[1].Allowed || out[1].RetryAfter != algorithms.Never {
			h.t.Errorf("%v batch with a huge cost: %s %s, want allowed then denied with RetryAfter Never", alg, fmtDecision(out[0]), fmtDecision(out[1]))
		}
		h.expectRemaining(now, l, key, l.Capacity()-1, "key asked for more than its capacity")
		h.expectFull(now, l, other, "other request of a batch with a huge cost")
	}
}
