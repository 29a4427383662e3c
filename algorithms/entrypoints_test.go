package algorithms_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
)

// TestEntryPointsAgree walks every algorithm, and the calendar windows,
// through random requests in every mode, deciding each one through every
// entry point: Decide (the plain mode), DecideAt with and without a
// calendar limit's Bounds, Peek, and Apply on a state of its own must make
// the same decision, and Apply must leave the state DecideAt returns. The
// costs reach three times the capacity either way, so debts, refunds
// beyond the capacity and over-capacity denies all pass through each.
func TestEntryPointsAgree(t *testing.T) {
	r := testRand(t)
	var limits []algorithms.Limit
	for _, alg := range algorithms.All() {
		for range 3 {
			limits = append(limits, randomLimit(r, alg))
		}
	}
	limits = append(limits,
		algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 5, Calendar: algorithms.Day},
		algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 7, Calendar: algorithms.Day},
		algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 4, Calendar: algorithms.Month, Location: time.FixedZone("UTC+7", 7*3600)},
	)
	modes := []algorithms.Mode{0, algorithms.Debt, algorithms.NoWait, algorithms.Debt | algorithms.NoWait}
	for _, l := range limits {
		if err := l.Validate(); err != nil {
			t.Fatalf("%s: %v", desc(l), err)
		}
		w := l.Period.Milliseconds()
		if l.Calendar != algorithms.NoCalendar {
			w = 24 * time.Hour.Milliseconds()
		}
		c := l.Capacity()
		var pure, owned algorithms.State
		now := epoch.UnixMilli()
		for step := range 400 {
			switch x := r.IntN(100); {
			case x < 40:
			case x < 80:
				now += r.Int64N(max(1, 2*w/c) + 1)
			case x < 92:
				now += r.Int64N(2*w + 1)
			default:
				now -= r.Int64N(w + 1)
			}
			var cost int64
			switch x := r.IntN(100); {
			case x < 45:
				cost = 1
			case x < 65:
				cost = 1 + r.Int64N(3*c)
			case x < 75:
				cost = 0
			default:
				cost = -1 - r.Int64N(3*c)
			}
			req := algorithms.Request{NowMs: now, Cost: cost, Mode: modes[r.IntN(len(modes))]}
			at := func(what string) string {
				return fmt.Sprintf("%s: step %d (t0%+dms, cost %d, mode %d): %s", desc(l), step, now-epoch.UnixMilli(), cost, req.Mode, what)
			}
			next, want := algorithms.DecideAt(l, pure, req)
			if req.Mode == 0 {
				if s, d := algorithms.Decide(l, pure, time.UnixMilli(now), cost); d != want || !equalState(s, next) {
					t.Fatalf("%s %+v %+v, DecideAt %+v %+v", at("Decide"), d, s, want, next)
				}
			}
			if l.Calendar != algorithms.NoCalendar {
				rb := req
				rb.Bounds = l.Calendar.Bounds(l.Location, now)
				if s, d := algorithms.DecideAt(l, pure, rb); d != want || !equalState(s, next) {
					t.Fatalf("%s %+v %+v, without them %+v %+v", at("DecideAt with Bounds"), d, s, want, next)
				}
			}
			if d := algorithms.Peek(l, pure, req); d != want {
				t.Fatalf("%s %+v, DecideAt %+v", at("Peek"), d, want)
			}
			if d := algorithms.Apply(l, &owned, req, nil); d != want || !equalState(owned, next) {
				t.Fatalf("%s %+v %+v, DecideAt %+v %+v", at("Apply"), d, owned, want, next)
			}
			pure = next
		}
	}
}

// equalState reports whether a and b hold the same state (their logs
// need not share an array).
func equalState(a, b algorithms.State) bool {
	return a.A == b.A && a.B == b.B && a.C == b.C && slices.Equal(a.Log, b.Log)
}
