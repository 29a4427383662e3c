package algorithms_test

import (
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
)

// TestCalendarDebtOutOfRange: a debt charge on a calendar limit whose now
// (Redis' clock) is a whole period past the boundaries (floodgate's clock)
// cannot be decided: it is allowed, records nothing and reports the whole
// cost Unrecorded, so the caller knows the usage was not counted.
func TestCalendarDebtOutOfRange(t *testing.T) {
	for _, alg := range []algorithms.Algorithm{algorithms.FixedWindow, algorithms.SlidingWindow} {
		l := algorithms.Limit{Algorithm: alg, Requests: 5, Calendar: algorithms.Day, Location: time.UTC}
		flood := epoch.UnixMilli()
		b := algorithms.Day.Bounds(time.UTC, flood)
		s, _ := algorithms.DecideAt(l, algorithms.State{}, algorithms.Request{NowMs: flood, Cost: 2, Bounds: b})
		for _, redisNow := range []int64{b[3], b[3] + 40*86_400_000} {
			for _, cost := range []int64{1, 4, 12} {
				next, d := algorithms.DecideAt(l, s, algorithms.Request{NowMs: redisNow, Cost: cost, Mode: algorithms.Debt, Bounds: b})
				if !d.Allowed || d.Unrecorded != cost || d.Debt != 0 || !sameState(next, s) {
					t.Errorf("%v: debt %d at +%dms past the period: %+v (state %+v, was %+v), want allowed, all %d unrecorded, nothing written",
						alg, cost, redisNow-b[3], d, next, s, cost)
				}
			}
		}
	}
}

// TestSlidingDebtBoundedAfterLoweredLimit: a sliding window spent deep
// into debt under a large limit, then read under a tenth of it in the
// next window, counts far more than twice the new limit; what it owes is
// still bounded by the capacity (Debt), as every debt is.
func TestSlidingDebtBoundedAfterLoweredLimit(t *testing.T) {
	hi := algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 100, Period: time.Second}
	lo := hi
	lo.Requests = 10
	start := epoch.UnixMilli() - epoch.UnixMilli()%1000
	s, d := algorithms.Settle(hi, algorithms.State{}, start, 200)
	if d.Debt != 100 || d.Unrecorded != 0 {
		t.Fatalf("debt of 200 under 100/s: %+v, want 100 owed", d)
	}
	for _, at := range []int64{start + 1000, start + 1500} {
		_, d = algorithms.Settle(lo, s, at, 0)
		if d.Debt != lo.Capacity() || d.Remaining != 0 {
			t.Errorf("under 10/s at +%dms: %+v, want %d owed (the capacity) and nothing remaining", at-start, d, lo.Capacity())
		}
	}
}
