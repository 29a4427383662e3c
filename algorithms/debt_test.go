package algorithms_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
)

// debtStep is one row of a debt table: a charge in Debt mode (debt true)
// or a plain check, and what it answers.
type debtStep struct {
	advance    time.Duration
	cost       int64
	debt       bool
	allowed    bool
	remaining  int64
	owed       int64 // Decision.Debt (Debt mode only)
	unrecorded int64
	retry      time.Duration
	reset      time.Duration
}

func runDebt(t *testing.T, l algorithms.Limit, steps []debtStep) {
	t.Helper()
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	var s algorithms.State
	now := epoch.UnixMilli()
	for i, st := range steps {
		now += st.advance.Milliseconds()
		var m algorithms.Mode
		if st.debt {
			m = algorithms.Debt
		}
		next, d := algorithms.DecideAt(l, s, algorithms.Request{NowMs: now, Cost: st.cost, Mode: m})
		if d.Allowed != st.allowed || d.Remaining != st.remaining || d.Debt != st.owed || d.Unrecorded != st.unrecorded || d.RetryAfter != st.retry || d.ResetAfter != st.reset {
			t.Errorf("%v step %d (cost %d, debt %v): got allowed=%v remaining=%d debt=%d unrecorded=%d retry=%v reset=%v, want allowed=%v remaining=%d debt=%d unrecorded=%d retry=%v reset=%v",
				l.Algorithm, i, st.cost, st.debt, d.Allowed, d.Remaining, d.Debt, d.Unrecorded, d.RetryAfter, d.ResetAfter,
				st.allowed, st.remaining, st.owed, st.unrecorded, st.retry, st.reset)
		}
		if d.TTL < d.ResetAfter {
			t.Errorf("step %d: TTL %v below ResetAfter %v", i, d.TTL, d.ResetAfter)
		}
		s = next
	}
}

// TestDebtTokenBucket: 10 a second (a token per 100ms), burst 10. A debt
// of 5 is repaid in 500ms, then a full bucket takes 1s more.
func TestDebtTokenBucket(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Second}
	runDebt(t, l, []debtStep{
		{cost: 15, debt: true, allowed: true, owed: 5, reset: 1500 * time.Millisecond},
		// A check is denied until the debt and the cost are refilled.
		{cost: 1, allowed: false, retry: 600 * time.Millisecond, reset: 1500 * time.Millisecond},
		{advance: 599 * time.Millisecond, cost: 1, allowed: false, retry: time.Millisecond, reset: 901 * time.Millisecond},
		{advance: time.Millisecond, cost: 1, allowed: true, reset: time.Second},
		// Beyond a debt of one capacity nothing is recorded.
		{cost: 100, debt: true, allowed: true, owed: 10, unrecorded: 90, reset: 2 * time.Second},
		{cost: 1, allowed: false, retry: 1100 * time.Millisecond, reset: 2 * time.Second},
		// A refund repays debt first.
		{cost: -4, allowed: true, remaining: 0, reset: 1600 * time.Millisecond},
		{cost: 0, debt: true, allowed: true, owed: 6, reset: 1600 * time.Millisecond},
		// Usage that fits is no debt.
		{advance: time.Hour, cost: 3, debt: true, allowed: true, remaining: 7, reset: 300 * time.Millisecond},
		// A cost above the capacity is charged in Debt mode, denied otherwise.
		{cost: 11, allowed: false, remaining: 7, retry: algorithms.Never, reset: 300 * time.Millisecond},
		{cost: 11, debt: true, allowed: true, owed: 4, reset: 1400 * time.Millisecond},
	})
}

// TestDebtFixedWindow: 10 a second. A count of 15 leaves 5 owed until the
// window ends; the next window starts afresh and admits 10.
func TestDebtFixedWindow(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 10, Period: time.Second}
	runDebt(t, l, []debtStep{
		{advance: 200 * time.Millisecond, cost: 15, debt: true, allowed: true, owed: 5, reset: 800 * time.Millisecond},
		{cost: 6, allowed: false, retry: 800 * time.Millisecond, reset: 800 * time.Millisecond},
		{cost: 5, allowed: false, retry: 800 * time.Millisecond, reset: 800 * time.Millisecond},
		{advance: 800 * time.Millisecond, cost: 0, debt: true, allowed: true, remaining: 10},
		{cost: 10, allowed: true, reset: time.Second},
		// 20 at most in a window: a debt of one capacity.
		{cost: 50, debt: true, allowed: true, owed: 10, unrecorded: 40, reset: time.Second},
		{cost: 1, allowed: false, retry: time.Second, reset: time.Second},
		{advance: time.Second, cost: 10, allowed: true, reset: time.Second},
	})
}

// TestDebtSlidingWindow: 10 a second. 15 in a window carry 5 into the next,
// which starts with those 5 plus the 10 kept by the window before it,
// decaying.
func TestDebtSlidingWindow(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 10, Period: time.Second}
	runDebt(t, l, []debtStep{
		{advance: 500 * time.Millisecond, cost: 15, debt: true, allowed: true, owed: 5, reset: 2500 * time.Millisecond},
		// Next window: 5 + 10·(1000−e)/1000 + 1 <= 10 at e = 600ms.
		{cost: 1, allowed: false, retry: 1100 * time.Millisecond, reset: 2500 * time.Millisecond},
		{advance: 1099 * time.Millisecond, cost: 1, allowed: false, retry: time.Millisecond, reset: 1401 * time.Millisecond},
		{advance: time.Millisecond, cost: 1, allowed: true, reset: 1400 * time.Millisecond},
		// 2 × Requests at most: the rest is unrecorded.
		{cost: 100, debt: true, allowed: true, owed: 10, unrecorded: 90, reset: 2400 * time.Millisecond},
		// At 600ms into its window: curr 16 (5 carried + 1 + 10) and prev
		// 10 × 0.4: 20. The next window: curr 6, prev 10; cost 10 needs the
		// one after (curr 0, prev 6 decaying to 0 at its end): 2.4s.
		{cost: 10, allowed: false, retry: 2400 * time.Millisecond, reset: 2400 * time.Millisecond},
		{advance: 2399 * time.Millisecond, cost: 10, allowed: false, remaining: 9, retry: time.Millisecond, reset: time.Millisecond},
		{advance: time.Millisecond, cost: 10, allowed: true, reset: 2 * time.Second},
	})
}

// TestDebtSlidingWindowLog: the log cannot hold more than Requests units:
// it fills its free slots and reports the rest, and never owes.
func TestDebtSlidingWindowLog(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 10, Period: time.Second}
	runDebt(t, l, []debtStep{
		{cost: 4, allowed: true, remaining: 6, reset: time.Second},
		{advance: 100 * time.Millisecond, cost: 15, debt: true, allowed: true, unrecorded: 9, reset: time.Second},
		{cost: 1, allowed: false, retry: 900 * time.Millisecond, reset: time.Second},
		{cost: 3, debt: true, allowed: true, unrecorded: 3, reset: time.Second},
	})
}

// TestDebtLeakyBucket: 10 a second (a slot of 100ms), a queue of 5. A
// debt takes its slots past the queue's size, up to twice it; later
// requests wait for the queue to drain back within its size.
func TestDebtLeakyBucket(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.LeakyBucket, Requests: 10, Period: time.Second, Burst: 5}
	runDebt(t, l, []debtStep{
		{cost: 8, debt: true, allowed: true, owed: 3, reset: 800 * time.Millisecond},
		{cost: 1, allowed: false, retry: 400 * time.Millisecond, reset: 800 * time.Millisecond},
		// Twice the queue's size at most: the rest is unrecorded.
		{cost: 5, debt: true, allowed: true, owed: 5, unrecorded: 3, reset: time.Second},
		{advance: 600 * time.Millisecond, cost: 1, allowed: true, reset: 500 * time.Millisecond},
	})
}

// TestDebtCalendar: a calendar quota of 10 a day in New York. A debt
// denies the rest of the day and ends with it (a billing period does not
// roll over), the fixed window's at midnight, the sliding window's
// decaying through the next day.
func TestDebtCalendar(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	day := func(alg algorithms.Algorithm) algorithms.Limit {
		return algorithms.Limit{Algorithm: alg, Requests: 10, Calendar: algorithms.Day, Location: ny}
	}
	// epoch is 2026-01-01T00:00:00Z, 19:00 on Dec 31 in New York: 5h to
	// midnight.
	runDebt(t, day(algorithms.FixedWindow), []debtStep{
		{cost: 15, debt: true, allowed: true, owed: 5, reset: 5 * time.Hour},
		{cost: 1, allowed: false, retry: 5 * time.Hour, reset: 5 * time.Hour},
		{cost: 50, debt: true, allowed: true, owed: 10, unrecorded: 45, reset: 5 * time.Hour},
		{advance: 5 * time.Hour, cost: 10, allowed: true, reset: 24 * time.Hour},
	})
	runDebt(t, day(algorithms.SlidingWindow), []debtStep{
		// 19h of the day passed: the estimate is 15, owed 5.
		{cost: 15, debt: true, allowed: true, owed: 5, reset: 29 * time.Hour},
		// The next day the 15 weigh as 10, the quota (the debt does not
		// roll over): 10 × (24h − e)/24h + 1 <= 10 at e = 2h24m.
		{cost: 1, allowed: false, retry: 5*time.Hour + 2*time.Hour + 24*time.Minute, reset: 29 * time.Hour},
		{advance: 7*time.Hour + 24*time.Minute - time.Millisecond, cost: 1, allowed: false, retry: time.Millisecond, reset: 21*time.Hour + 36*time.Minute + time.Millisecond},
		{advance: time.Millisecond, cost: 1, allowed: true, reset: 21*time.Hour + 36*time.Minute + 24*time.Hour},
	})
}

// TestDebtRetryIsExact charges random debts on random states and checks,
// for every algorithm, with a clock that sometimes goes back, that a
// cost-1 check is denied 1ms before the
// RetryAfter it is told and admitted at it.
func TestDebtRetryIsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 3))
	limits := []algorithms.Limit{
		{Algorithm: algorithms.TokenBucket, Requests: 7, Period: 3 * time.Second, Burst: 11},
		{Algorithm: algorithms.TokenBucket, Requests: 1000, Period: time.Minute},
		{Algorithm: algorithms.SlidingWindow, Requests: 7, Period: 3 * time.Second},
		{Algorithm: algorithms.SlidingWindow, Requests: 1, Period: time.Second},
		{Algorithm: algorithms.FixedWindow, Requests: 7, Period: 3 * time.Second},
		{Algorithm: algorithms.SlidingWindowLog, Requests: 7, Period: 3 * time.Second},
		{Algorithm: algorithms.LeakyBucket, Requests: 7, Period: 3 * time.Second, Burst: 11},
		{Algorithm: algorithms.LeakyBucket, Requests: 3, Period: time.Second},
		{Algorithm: algorithms.FixedWindow, Requests: 7, Calendar: algorithms.Day, Location: newYork(t)},
		{Algorithm: algorithms.SlidingWindow, Requests: 7, Calendar: algorithms.Day, Location: newYork(t)},
	}
	for _, l := range limits {
		var s algorithms.State
		now := epoch.UnixMilli()
		step := l.Period.Milliseconds()
		if l.Calendar != algorithms.NoCalendar {
			step = 24 * time.Hour.Milliseconds()
		}
		for i := range 2000 {
			now += rng.Int64N(2 * step)
			if rng.IntN(10) == 0 { // the clock goes back
				now -= rng.Int64N(step)
			}
			m := algorithms.Mode(0)
			cost := rng.Int64N(l.Capacity()+1) - 1
			if rng.IntN(2) == 0 {
				m, cost = algorithms.Debt, rng.Int64N(3*l.Capacity())
			}
			var d algorithms.Decision
			s, d = algorithms.DecideAt(l, s, algorithms.Request{NowMs: now, Cost: cost, Mode: m})
			if d.Debt < 0 || d.Debt > l.Capacity() || d.Unrecorded < 0 || (m == algorithms.Debt && cost > 0 && !d.Allowed) {
				t.Fatalf("%v step %d: cost %d mode %d: %+v", l.Algorithm, i, cost, m, d)
			}
			for _, c := range []int64{1, l.Capacity()} {
				p := algorithms.Peek(l, s, algorithms.Request{NowMs: now, Cost: c})
				if p.Allowed {
					continue
				}
				w := p.RetryAfter.Milliseconds()
				if algorithms.Peek(l, s, algorithms.Request{NowMs: now + w - 1, Cost: c}).Allowed || !algorithms.Peek(l, s, algorithms.Request{NowMs: now + w, Cost: c}).Allowed {
					t.Fatalf("%v step %d: cost %d told to wait %dms, state %+v debt %d", l.Algorithm, i, c, w, s, algorithms.DebtOf(l, s, now))
				}
				if r := p.ResetAfter.Milliseconds(); algorithms.Peek(l, s, algorithms.Request{NowMs: now + r, Cost: 0}).Remaining != l.Capacity() {
					t.Fatalf("%v step %d: not full after ResetAfter %dms", l.Algorithm, i, r)
				}
			}
		}
	}
}

// TestDebtLogLoweredLimit: a log holding more live units than a lowered
// limit's Requests records nothing of a debt charge and reports all of it,
// never more.
func TestDebtLogLoweredLimit(t *testing.T) {
	hi := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 10, Period: time.Second}
	lo := hi
	lo.Requests = 4
	now := epoch.UnixMilli()
	s, _ := algorithms.DecideAt(hi, algorithms.State{}, algorithms.Request{NowMs: now, Cost: 8, Mode: 0})
	next, d := algorithms.DecideAt(lo, s, algorithms.Request{NowMs: now, Cost: 3, Mode: algorithms.Debt})
	if !d.Allowed || d.Unrecorded != 3 || d.Remaining != 0 || !sameState(next, s) {
		t.Fatalf("got %+v (state changed: %v), want 3 unrecorded and nothing written", d, !sameState(next, s))
	}
}

func newYork(t *testing.T) *time.Location {
	t.Helper()
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	return ny
}
