package storetest

import (
	"fmt"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
)

// testWindowEdge is the window-edge attack on a simulated clock,
// 10 per 2s: ten requests in the 300ms before a window edge and ten in the
// 150ms after it, for every algorithm that counts in windows. One whose
// count starts afresh at the edge (algorithms.Facts.Afresh; the reference
// server's only algorithm) admits all twenty, twice its limit; the others
// deny the second ten (their count still weighs the first ten). Every
// decision also matches the model. (e2e's TestEnvoyWindowEdge is the real-clock smoke
// test of the same attack through the binary.)
func testWindowEdge(h *harness) {
	edge := epoch.Add(10 * time.Second) // a multiple of 2s in Unix time
	for _, alg := range windowed() {
		tc := struct {
			alg       algorithms.Algorithm
			admitted2 bool // the ten after the edge
		}{alg, alg.Facts().Afresh}
		l := algorithms.Limit{Algorithm: tc.alg, Requests: 10, Period: 2 * time.Second}
		key := h.key("edge-" + tc.alg.String())
		m := newModel()
		call := func(what string, now time.Time, want bool) {
			h.t.Helper()
			req := store.Request{Key: key, Limit: l, Cost: 1}
			got := h.decideBoth(m, now, fmt.Sprintf("%v %s", tc.alg, what), req)
			if got[0].Allowed != want {
				h.t.Errorf("%v %s (edge%+v): allowed %v, want %v", tc.alg, what, now.Sub(edge), got[0].Allowed, want)
			}
		}
		for i := range 10 {
			call(fmt.Sprintf("call %d before the edge", i), edge.Add(-300*time.Millisecond+time.Duration(i)*25*time.Millisecond), true)
		}
		for i := range 10 {
			call(fmt.Sprintf("call %d after the edge", i), edge.Add(10*time.Millisecond+time.Duration(i)*15*time.Millisecond), tc.admitted2)
		}
	}
}
