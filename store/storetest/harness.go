package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
)

// harness is one subtest's store, keys and helpers.
type harness struct {
	t      *testing.T
	s      store.Store
	prefix string
}

// key is name under this subtest's unique prefix.
func (h *harness) key(name string) string { return h.prefix + name }

// decide runs one Decide call and fails the test on an error.
func (h *harness) decide(now time.Time, reqs ...store.Request) []algorithms.Decision {
	h.t.Helper()
	out := make([]algorithms.Decision, len(reqs))
	if err := h.s.Decide(context.Background(), now, reqs, out); err != nil {
		h.t.Fatalf("Decide(%v, %d requests): %v", now.Sub(epoch), len(reqs), err)
	}
	return out
}

// peek returns the decision of a cost-0 look at key.
func (h *harness) peek(now time.Time, l algorithms.Limit, key string) algorithms.Decision {
	h.t.Helper()
	return h.decide(now, store.Request{Key: key, Limit: l})[0]
}

// expectFull fails unless key is at its full capacity.
func (h *harness) expectFull(now time.Time, l algorithms.Limit, key, what string) {
	h.t.Helper()
	h.expectRemaining(now, l, key, l.Capacity(), what)
}

// expectRemaining fails unless a peek at key reports want remaining.
func (h *harness) expectRemaining(now time.Time, l algorithms.Limit, key string, want int64, what string) {
	h.t.Helper()
	if d := h.peek(now, l, key); d.Remaining != want || !d.Allowed {
		h.t.Errorf("%s: %v peek %q: Remaining %d (allowed %v), want %d", what, l.Algorithm, key, d.Remaining, d.Allowed, want)
	}
}

// decideBoth decides reqs at now on the store and on the model m, fails
// where the two differ (what names the step) and returns the store's
// decisions.
func (h *harness) decideBoth(m *model, now time.Time, what string, reqs ...store.Request) []algorithms.Decision {
	h.t.Helper()
	got := h.decide(now, reqs...)
	h.checkAgainst(what, got, m.decide(now, reqs...))
	return got
}

// checkAgainst compares a store's decisions with the model's, on the fields
// a caller sees (TTL is the store's business).
func (h *harness) checkAgainst(what string, got, want []algorithms.Decision) {
	h.t.Helper()
	for i := range want {
		g, w := got[i], want[i]
		if g.Allowed != w.Allowed || g.Limit != w.Limit || g.Remaining != w.Remaining ||
			g.RetryAfter != w.RetryAfter || g.ResetAfter != w.ResetAfter || g.Wait != w.Wait {
			h.t.Errorf("%s: decision %d:\n got  %s\n want %s", what, i, fmtDecision(g), fmtDecision(w))
		}
	}
}

func fmtDecision(d algorithms.Decision) string {
	return fmt.Sprintf("{Allowed:%v Limit:%d Remaining:%d RetryAfter:%v ResetAfter:%v}",
		d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter)
}
