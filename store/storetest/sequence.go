package storetest

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
)

// Cases that follow the model over time: a scripted sequence and a random
// trace.

// testSequence spends a fresh key down to zero, checks the deny's exact
// RetryAfter, waits it out and passes again, for every algorithm.
func testSequence(h *harness) {
	for alg, l := range limits() {
		key := h.key("seq-" + alg.String())
		m := newModel()
		now := epoch.Add(137 * time.Millisecond)
		step := func(what string, cost int64) algorithms.Decision {
			h.t.Helper()
			return h.decideBoth(m, now, fmt.Sprintf("%v %s", alg, what), store.Request{Key: key, Limit: l, Cost: cost})[0]
		}

		if d := step("fresh peek", 0); !d.Allowed || d.Remaining != l.Capacity() || d.ResetAfter != 0 {
			h.t.Errorf("%v fresh key: %s, want full (Remaining %d, ResetAfter 0)", alg, fmtDecision(d), l.Capacity())
		}
		for i := int64(1); i <= l.Capacity(); i++ {
			d := step(fmt.Sprintf("spend %d", i), 1)
			if !d.Allowed || d.Remaining != l.Capacity()-i {
				h.t.Errorf("%v spend %d: %s, want allowed with Remaining %d", alg, i, fmtDecision(d), l.Capacity()-i)
			}
			now = now.Add(3 * time.Millisecond)
		}
		d := step("deny", 1)
		if d.Allowed || d.RetryAfter <= 0 {
			h.t.Fatalf("%v after spending everything: %s, want a deny with a positive RetryAfter", alg, fmtDecision(d))
		}
		now = now.Add(d.RetryAfter - time.Millisecond)
		if d := step("1ms before RetryAfter", 1); d.Allowed {
			h.t.Errorf("%v 1ms before RetryAfter: allowed, want denied", alg)
		}
		now = now.Add(time.Millisecond)
		if d := step("at RetryAfter", 1); !d.Allowed {
			h.t.Errorf("%v after waiting RetryAfter: %s, want allowed", alg, fmtDecision(d))
		}
	}
}

// testRandomTrace runs seeded random (Δt, cost, batch) sequences through the
// store and the model and demands identical decisions.
func testRandomTrace(h *harness) {
	seed := time.Now().UnixNano()
	h.t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	for alg, l := range limits() {
		keys := []string{h.key("trace-a-" + alg.String()), h.key("trace-b-" + alg.String()), h.key("trace-c-" + alg.String())}
		m := newModel()
		now := epoch.Add(time.Duration(rng.IntN(1000)) * time.Millisecond)
		for step := range 400 {
			switch p := rng.IntN(10); {
			case p < 5:
				now = now.Add(time.Duration(rng.IntN(120)) * time.Millisecond)
			case p < 8:
				now = now.Add(time.Duration(rng.IntN(int(l.Period.Milliseconds())*2)) * time.Millisecond)
			}
			n := 1 + rng.IntN(3)
			reqs := make([]store.Request, n)
			for i := range reqs {
				reqs[i] = store.Request{
					Key:   keys[rng.IntN(len(keys))],
					Limit: l,
					Cost:  rng.Int64N(l.Capacity()+4) - 2, // -2 … capacity+1
				}
				switch rng.IntN(8) {
				case 0, 1:
					reqs[i].Mode = algorithms.NoWait // only an algorithm that waits heeds it
				case 2: // usage after the fact: debt, often past the capacity
					reqs[i].Mode, reqs[i].Cost = algorithms.Debt, 1+rng.Int64N(3*l.Capacity())
				}
			}
			if n == 1 && rng.IntN(5) == 0 {
				reqs[0].DryRun = true
			}
			h.decideBoth(m, now, fmt.Sprintf("%v step %d at +%v %+v", alg, step, now.Sub(epoch), reqs), reqs...)
			if h.t.Failed() {
				return
			}
		}
	}
}
