package storetest

import (
	"context"
	"errors"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
)

// testErrors: a done context and a mismatched out slice are errors, not
// panics, and decide nothing.
func testErrors(h *harness) {
	l := limitFor(algorithms.Default)
	key := h.key("errors")
	now := epoch
	reqs := []store.Request{{Key: key, Limit: l, Cost: 1}}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := h.s.Decide(ctx, now, reqs, make([]algorithms.Decision, 1))
	if err == nil || !errors.Is(err, context.Canceled) {
		h.t.Errorf("Decide with a cancelled context: %v, want an error wrapping context.Canceled", err)
	}
	for _, n := range []int{0, 2} {
		err := h.s.Decide(context.Background(), now, reqs, make([]algorithms.Decision, n))
		if !errors.Is(err, store.ErrInvalid) {
			h.t.Errorf("Decide with 1 request and %d decisions: %v, want an error wrapping store.ErrInvalid", n, err)
		}
	}
	err = h.s.Decide(context.Background(), now, nil, nil)
	if err != nil {
		h.t.Errorf("Decide with no requests: %v, want nil", err)
	}
	h.expectFull(now, l, key, "after failed calls")
}

// testPing: a working store pings.
func testPing(h *harness) {
	if err := h.s.Ping(context.Background()); err != nil {
		h.t.Errorf("Ping: %v", err)
	}
}
