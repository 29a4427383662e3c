package storetest

import (
	"fmt"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
)

// testExpiry: once now passes a state's ResetAfter, the key behaves as
// absent.
func testExpiry(h *harness) {
	for alg, l := range limits() {
		key := h.key("expiry-" + alg.String())
		now := epoch.Add(5*time.Second + 333*time.Millisecond)
		d := h.decide(now, store.Request{Key: key, Limit: l, Cost: l.Capacity()})[0]
		if !d.Allowed || d.ResetAfter <= 0 {
			h.t.Fatalf("%v spend the capacity: %s, want allowed with a positive ResetAfter", alg, fmtDecision(d))
		}
		later := now.Add(d.ResetAfter)
		got := h.peek(later, l, key)
		fresh := h.peek(later, l, h.key("expiry-fresh-"+alg.String()))
		h.checkAgainst(fmt.Sprintf("%v after ResetAfter", alg), []algorithms.Decision{got}, []algorithms.Decision{fresh})
		if got.Remaining != l.Capacity() || got.ResetAfter != 0 {
			h.t.Errorf("%v after ResetAfter: %s, want a full key", alg, fmtDecision(got))
		}
		d = h.decide(later.Add(time.Hour), store.Request{Key: key, Limit: l, Cost: 1})[0]
		if !d.Allowed || d.Remaining != l.Capacity()-1 {
			h.t.Errorf("%v an hour later: %s, want allowed with Remaining %d", alg, fmtDecision(d), l.Capacity()-1)
		}
	}
}
