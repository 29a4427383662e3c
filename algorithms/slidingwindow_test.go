package algorithms_test

import (
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
)

// repeat returns n copies of st, the first one advancing the clock.
func repeat(n int, first time.Duration, st step) []step {
	out := make([]step, n)
	for i := range out {
		out[i] = st
	}
	out[0].advance = first
	return out
}

// countdown returns n allowed unit costs with remaining n-1 … 0, the first
// one advancing the clock.
func countdown(n int, first time.Duration, reset time.Duration) []step {
	out := make([]step, n)
	for i := range out {
		out[i] = step{cost: 1, allowed: true, remaining: int64(n - 1 - i), reset: reset}
	}
	out[0].advance = first
	return out
}

func join(parts ...[]step) []step {
	var out []step
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// TestSlidingWindowEdgeAttack is the window-edge attack: ten
// requests just before a window edge and ten just after. The previous
// window still weighs 9.95 requests 10ms into the next one, so the second
// ten are denied (fixed_window lets them all through; see
// TestFixedWindowEdgeBurst).
func TestSlidingWindowEdgeAttack(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 10, Period: 2 * time.Second}
	runSteps(t, l, algorithms.State{}, join(
		countdown(10, 1990*time.Millisecond, 2010*time.Millisecond),
		// t0+2010ms: 10 × 1990/2000 = 9.95; one more fits once the old
		// window weighs 9, 190ms later.
		repeat(10, 20*time.Millisecond, step{cost: 1, allowed: false, remaining: 0, retry: 190 * time.Millisecond, reset: 1990 * time.Millisecond}),
		[]step{
			{advance: 190 * time.Millisecond, cost: 1, allowed: true, remaining: 0, reset: 3800 * time.Millisecond},
			// From here one request per 200ms: the rate, not a burst.
			{cost: 1, allowed: false, remaining: 0, retry: 200 * time.Millisecond, reset: 3800 * time.Millisecond},
			{advance: 200 * time.Millisecond, cost: 1, allowed: true, remaining: 0, reset: 3600 * time.Millisecond},
		},
	))
}

// TestSlidingWindowRetryDecays checks that a deny's RetryAfter comes from
// the decaying previous window, counting the roll where the current window
// becomes the previous one — never simply "until the window ends".
func TestSlidingWindowRetryDecays(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 10, Period: 2 * time.Second}
	runSteps(t, l, algorithms.State{}, []step{
		{cost: 10, allowed: true, remaining: 0, reset: 4 * time.Second},
		// The window ends in 1.5s, but then the ten weigh fully: one more
		// fits 200ms into the next window, when they weigh 9.
		{advance: 500 * time.Millisecond, cost: 1, allowed: false, remaining: 0, retry: 1700 * time.Millisecond, reset: 3500 * time.Millisecond},
		{advance: 1699 * time.Millisecond, cost: 1, allowed: false, remaining: 0, retry: time.Millisecond, reset: 1801 * time.Millisecond},
		{advance: time.Millisecond, cost: 1, allowed: true, remaining: 0, reset: 3800 * time.Millisecond},
		// t0+3000ms, halfway: 1 + 10 × 0.5 = 6.
		{advance: 800 * time.Millisecond, cost: 0, allowed: true, remaining: 4, reset: 3 * time.Second},
		// 5 fits inside this window, once the previous ten weigh 4.
		{cost: 5, allowed: false, remaining: 4, retry: 200 * time.Millisecond, reset: 3 * time.Second},
		{cost: 4, allowed: true, remaining: 0, reset: 3 * time.Second},
		// 6 fits only after the roll, 400ms into the next window, when
		// this window's 5 weigh 4.
		{cost: 6, allowed: false, remaining: 0, retry: 1400 * time.Millisecond, reset: 3 * time.Second},
		{advance: 1399 * time.Millisecond, cost: 6, allowed: false, remaining: 5, retry: time.Millisecond, reset: 1601 * time.Millisecond},
		{advance: time.Millisecond, cost: 6, allowed: true, remaining: 0, reset: 3600 * time.Millisecond},
		// Two windows later nothing is left.
		{advance: 3600 * time.Millisecond, cost: 0, allowed: true, remaining: 10, reset: 0},
		// More than the limit never passes.
		{cost: 11, allowed: false, remaining: 10, retry: algorithms.Never, reset: 0},
	})
}

// TestSlidingWindowClockBack moves the clock back into an earlier window:
// the decision is made at the start of the stored window, and waits are
// measured from the caller's now.
func TestSlidingWindowClockBack(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 10, Period: 2 * time.Second}
	runSteps(t, l, algorithms.State{}, []step{
		{advance: 2500 * time.Millisecond, cost: 4, allowed: true, remaining: 6, reset: 3500 * time.Millisecond},
		// t0+1000ms, window 0; decided at t0+2000ms, window 1's start.
		{advance: -1500 * time.Millisecond, cost: 0, allowed: true, remaining: 6, reset: 5 * time.Second},
		// 7 fits 500ms into window 2, when the 4 weigh 3: t0+4500ms.
		{cost: 7, allowed: false, remaining: 6, retry: 3500 * time.Millisecond, reset: 5 * time.Second},
		{cost: 6, allowed: true, remaining: 0, reset: 5 * time.Second},
		// t0+4499ms: the 10 of window 1 weigh 7.505.
		{advance: 3499 * time.Millisecond, cost: 3, allowed: false, remaining: 2, retry: 101 * time.Millisecond, reset: 1501 * time.Millisecond},
		// Back into the stored window (t0+3500ms): decided at now.
		{advance: -999 * time.Millisecond, cost: 0, allowed: true, remaining: 0, reset: 2500 * time.Millisecond},
	})
}

// TestSlidingWindowRefund gives units back: first from the current window,
// then from the previous one.
func TestSlidingWindowRefund(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 10, Period: 2 * time.Second}
	runSteps(t, l, algorithms.State{}, []step{
		{cost: 8, allowed: true, remaining: 2, reset: 4 * time.Second},
		{advance: time.Second, cost: -3, allowed: true, remaining: 5, reset: 3 * time.Second},
		// t0+2000ms: the 5 became the previous window.
		{advance: time.Second, cost: 2, allowed: true, remaining: 3, reset: 4 * time.Second},
		// Refund 4: 2 from this window, 2 from the previous one.
		{cost: -4, allowed: true, remaining: 7, reset: 2 * time.Second},
		{cost: -100, allowed: true, remaining: 10, reset: 0},
		{cost: 10, allowed: true, remaining: 0, reset: 4 * time.Second},
	})
}

// TestSlidingWindowClockBackTTL pins the TTL of an emptied window ahead of
// the caller's clock: until the clock reaches it, the state decides at that
// window's start, unlike no state, so its TTL must last until then.
func TestSlidingWindowClockBackTTL(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 10, Period: 2 * time.Second}
	s, _ := algorithms.Decide(l, algorithms.State{}, epoch.Add(2500*time.Millisecond), 4)
	back := epoch.Add(time.Second)
	s, d := algorithms.Decide(l, s, back, -4)
	want := algorithms.Decision{Allowed: true, Limit: 10, Remaining: 10, TTL: time.Second}
	if d != want {
		t.Fatalf("refund to empty 1.5s back: got %+v, want %+v", d, want)
	}
	_, kept := algorithms.Decide(l, s, back, 1)
	_, none := algorithms.Decide(l, algorithms.State{}, back, 1)
	if kept == none {
		t.Fatalf("the emptied state decides like no state (%+v); the test no longer shows why the TTL is needed", kept)
	}
	at := back.Add(d.TTL)
	_, kept = algorithms.Decide(l, s, at, 1)
	_, none = algorithms.Decide(l, algorithms.State{}, at, 1)
	if kept != none {
		t.Errorf("at the TTL: kept state gives %+v, no state gives %+v", kept, none)
	}
}
