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

// TestFixedWindowSteps covers refunds and costs above the limit.
func TestFixedWindowSteps(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 10, Period: 2 * time.Second}
	runSteps(t, l, algorithms.State{}, []step{
		{cost: 0, allowed: true, remaining: 10, reset: 0},
		{advance: 2010 * time.Millisecond, cost: 10, allowed: true, remaining: 0, reset: 1990 * time.Millisecond},
		{cost: -3, allowed: true, remaining: 3, reset: 1990 * time.Millisecond},
		{cost: 4, allowed: false, remaining: 3, retry: 1990 * time.Millisecond, reset: 1990 * time.Millisecond},
		{cost: 3, allowed: true, remaining: 0, reset: 1990 * time.Millisecond},
		{cost: 11, allowed: false, remaining: 0, retry: algorithms.Never, reset: 1990 * time.Millisecond},
		{advance: 1989 * time.Millisecond, cost: 1, allowed: false, remaining: 0, retry: time.Millisecond, reset: time.Millisecond},
		{advance: time.Millisecond, cost: 10, allowed: true, remaining: 0, reset: 2 * time.Second},
		{cost: -20, allowed: true, remaining: 10, reset: 0},
	})
}

// TestFixedWindowClockBack: a clock that went back into an earlier
// window counts there on its own, and leaves the later window's count,
// which still decides once the clock is back in that window: a look or
// a refund in the earlier window keeps it, with a TTL to its window's
// end.
func TestFixedWindowClockBack(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 10, Period: 2 * time.Second}
	s, _ := algorithms.Decide(l, algorithms.State{}, epoch.Add(2010*time.Millisecond), 3)
	back := epoch.Add(10 * time.Millisecond)
	s2, d := algorithms.Decide(l, s, back, -3)
	want := algorithms.Decision{Allowed: true, Limit: 10, Remaining: 10, TTL: 3990 * time.Millisecond}
	if d != want || s2.A != s.A || s2.B != s.B {
		t.Fatalf("refund to empty 2s back: got %+v (state %+v), want %+v and the later window's state %+v", d, s2, want, s)
	}
	if _, d := algorithms.Decide(l, s, back, 10); !d.Allowed {
		t.Fatalf("all of the earlier window: %+v, want allowed", d)
	}
	if _, d := algorithms.Decide(l, s2, epoch.Add(2500*time.Millisecond), 0); d.Remaining != 7 {
		t.Fatalf("back in the later window: %+v, want its 3 still counted", d)
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
