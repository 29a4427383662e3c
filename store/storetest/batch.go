package storetest

import (
	"fmt"
	"time"

	"github.com/floodgate/floodgate/store"
)

// Cases on batches: all or nothing, and a key repeated in one batch.

// testAllOrNothing: a batch whose last request is denied charges none of
// the others, and each decision still reports its own request's outcome.
func testAllOrNothing(h *harness) {
	for alg, l := range limits() {
		a, b, c := h.key("aon-a-"+alg.String()), h.key("aon-b-"+alg.String()), h.key("aon-c-"+alg.String())
		m := newModel()
		now := epoch.Add(10 * time.Millisecond)
		spend := store.Request{Key: c, Limit: l, Cost: l.Capacity()}
		h.decideBoth(m, now, "exhaust c", spend)

		batch := []store.Request{
			{Key: a, Limit: l, Cost: 1},
			{Key: b, Limit: l, Cost: 2},
			{Key: c, Limit: l, Cost: 1},
		}
		got := h.decideBoth(m, now, fmt.Sprintf("%v denied batch", alg), batch...)
		if !got[0].Allowed || !got[1].Allowed || got[2].Allowed {
			h.t.Errorf("%v batch outcomes %v %v %v, want true true false", alg, got[0].Allowed, got[1].Allowed, got[2].Allowed)
		}
		if got[0].Remaining != l.Capacity()-1 || got[1].Remaining != l.Capacity()-2 {
			h.t.Errorf("%v batch Remaining %d %d, want %d %d (each request's own outcome)",
				alg, got[0].Remaining, got[1].Remaining, l.Capacity()-1, l.Capacity()-2)
		}
		h.expectFull(now, l, a, "first request of a denied batch")
		h.expectFull(now, l, b, "second request of a denied batch")
		h.expectRemaining(now, l, c, 0, "denied request of a denied batch")

		// The same batch without the exhausted key is charged in full.
		h.decideBoth(m, now, fmt.Sprintf("%v admitted batch", alg), batch[:2]...)
		h.expectRemaining(now, l, a, l.Capacity()-1, "admitted batch")
		h.expectRemaining(now, l, b, l.Capacity()-2, "admitted batch")
	}
}

// testRepeatedKey: a key repeated in one batch is charged twice, and
// all or nothing holds for the repeats too.
func testRepeatedKey(h *harness) {
	for alg, l := range limits() {
		key := h.key("repeat-" + alg.String())
		m := newModel()
		now := epoch.Add(500 * time.Millisecond)
		c := l.Capacity()

		over := []store.Request{{Key: key, Limit: l, Cost: c/2 + 1}, {Key: key, Limit: l, Cost: c/2 + 1}}
		got := h.decideBoth(m, now, fmt.Sprintf("%v over-capacity repeat", alg), over...)
		if !got[0].Allowed || got[1].Allowed {
			h.t.Errorf("%v repeat of %d+%d with capacity %d: allowed %v %v, want true false", alg, c/2+1, c/2+1, c, got[0].Allowed, got[1].Allowed)
		}
		h.expectFull(now, l, key, "after a denied repeat")

		fit := []store.Request{{Key: key, Limit: l, Cost: 2}, {Key: key, Limit: l, Cost: 2}}
		got = h.decideBoth(m, now, fmt.Sprintf("%v fitting repeat", alg), fit...)
		if got[1].Remaining != c-4 {
			h.t.Errorf("%v second of a repeated pair: Remaining %d, want %d", alg, got[1].Remaining, c-4)
		}
		h.expectRemaining(now, l, key, c-4, "after an admitted repeat")
	}
}
