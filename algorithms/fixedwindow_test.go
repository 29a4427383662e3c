package algorithms_test

import (
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
)

// TestFixedWindowEdgeBurst documents why fixed_window is burst-prone: the
// window-edge attack (ten requests just before a window edge, ten
// just after) gets all twenty through within 20ms against a limit of 10 per
// 2s. TestSlidingWindowEdgeAttack denies the second ten.
func TestFixedWindowEdgeBurst(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 10, Period: 2 * time.Second}
	runSteps(t, l, algorithms.State{}, join(
		countdown(10, 1990*time.Millisecond, 10*time.Millisecond),
		[]step{{cost: 1, allowed: false, remaining: 0, retry: 10 * time.Millisecond, reset: 10 * time.Millisecond}},
		countdown(10, 20*time.Millisecond, 1990*time.Millisecond),
		[]step{{cost: 1, allowed: false, remaining: 0, retry: 1990 * time.Millisecond, reset: 1990 * time.Millisecond}},
	))
}

// TestFixedWindowSteps covers refunds, the clock going back into an earlier
// window (it stays in the stored one) and costs above the limit.
func TestFixedWindowSteps(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 10, Period: 2 * time.Second}
	runSteps(t, l, algorithms.State{}, []step{
		{cost: 0, allowed: true, remaining: 10, reset: 0},
		{advance: 2010 * time.Millisecond, cost: 10, allowed: true, remaining: 0, reset: 1990 * time.Millisecond},
		{cost: -3, allowed: true, remaining: 3, reset: 1990 * time.Millisecond},
		// t0+1010ms is window 0; the stored window 1 still counts, and
		// ends 2990ms from now.
		{advance: -time.Second, cost: 0, allowed: true, remaining: 3, reset: 2990 * time.Millisecond},
		{cost: 4, allowed: false, remaining: 3, retry: 2990 * time.Millisecond, reset: 2990 * time.Millisecond},
		{cost: 3, allowed: true, remaining: 0, reset: 2990 * time.Millisecond},
		{cost: 11, allowed: false, remaining: 0, retry: algorithms.Never, reset: 2990 * time.Millisecond},
		{advance: 2989 * time.Millisecond, cost: 1, allowed: false, remaining: 0, retry: time.Millisecond, reset: time.Millisecond},
		{advance: time.Millisecond, cost: 10, allowed: true, remaining: 0, reset: 2 * time.Second},
		{cost: -20, allowed: true, remaining: 10, reset: 0},
	})
}

// TestFixedWindowClockBackTTL pins the TTL of an emptied window ahead of
// the caller's clock: the state still decides differently from no state
// (it counts into the later window) until the clock reaches that window,
// so its TTL must last until then, not be 0.
func TestFixedWindowClockBackTTL(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 10, Period: 2 * time.Second}
	s, _ := algorithms.Decide(l, algorithms.State{}, epoch.Add(2010*time.Millisecond), 3)
	back := epoch.Add(10 * time.Millisecond)
	s, d := algorithms.Decide(l, s, back, -3)
	want := algorithms.Decision{Allowed: true, Limit: 10, Remaining: 10, TTL: 1990 * time.Millisecond}
	if d != want {
		t.Fatalf("refund to empty 2s back: got %+v, want %+v", d, want)
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

// TestWindowPeriodChange pins a bug: window states once held the window
// index (now / period), so a state written under a 1ms period and read
// under 1h put the window far in the future and the waits overflowed
// time.Duration (a negative TTL). Now a state from another period counts
// as an empty window, and every wait stays within the new period.
func TestWindowPeriodChange(t *testing.T) {
	t0 := time.Date(2000, 1, 1, 0, 0, 0, 7_000_000, time.UTC)
	for _, alg := range []algorithms.Algorithm{algorithms.FixedWindow, algorithms.SlidingWindow} {
		short := algorithms.Limit{Algorithm: alg, Requests: 1, Period: 3 * time.Millisecond}
		long := algorithms.Limit{Algorithm: alg, Requests: 1, Period: time.Hour}
		s, d := algorithms.Decide(short, algorithms.State{}, t0, 1)
		if !d.Allowed {
			t.Fatalf("%v: first request denied", alg)
		}
		_, d = algorithms.Decide(long, s, t0, 1)
		if !d.Allowed || d.TTL < 0 || d.TTL > 2*time.Hour || d.ResetAfter < 0 {
			t.Fatalf("%v after a period change: got %+v, want allowed with waits within the new period", alg, d)
		}
	}
}
