package algorithms_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
)

// TestSlidingLogSteps: 3 per second, exact. A request leaves the window W
// after it was admitted, and a deny waits for exactly enough of the oldest
// to leave.
func TestSlidingLogSteps(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 3, Period: time.Second}
	runSteps(t, l, algorithms.State{}, []step{
		{cost: 1, allowed: true, remaining: 2, reset: time.Second},
		{advance: 100 * time.Millisecond, cost: 1, allowed: true, remaining: 1, reset: time.Second},
		{advance: 100 * time.Millisecond, cost: 1, allowed: true, remaining: 0, reset: time.Second},
		// t0+300ms: the t0 entry leaves at t0+1000ms, the t0+100ms one at
		// t0+1100ms.
		{advance: 100 * time.Millisecond, cost: 1, allowed: false, remaining: 0, retry: 700 * time.Millisecond, reset: 900 * time.Millisecond},
		{cost: 2, allowed: false, remaining: 0, retry: 800 * time.Millisecond, reset: 900 * time.Millisecond},
		{cost: 4, allowed: false, remaining: 0, retry: algorithms.Never, reset: 900 * time.Millisecond},
		{advance: 699 * time.Millisecond, cost: 1, allowed: false, remaining: 0, retry: time.Millisecond, reset: 201 * time.Millisecond},
		{advance: time.Millisecond, cost: 1, allowed: true, remaining: 0, reset: time.Second},
		// The clock goes back to t0+500ms: decided at the newest entry,
		// t0+1000ms, where t0+100ms is the oldest live entry.
		{advance: -500 * time.Millisecond, cost: 1, allowed: false, remaining: 0, retry: 600 * time.Millisecond, reset: 1500 * time.Millisecond},
		// A refund removes the newest entry first.
		{cost: -1, allowed: true, remaining: 1, reset: 700 * time.Millisecond},
		{cost: 1, allowed: true, remaining: 0, reset: time.Second},
		{advance: 600 * time.Millisecond, cost: 1, allowed: true, remaining: 0, reset: time.Second},
		{cost: 1, allowed: false, remaining: 0, retry: 100 * time.Millisecond, reset: time.Second},
		{advance: 2 * time.Second, cost: 0, allowed: true, remaining: 3, reset: 0},
	})
}

// TestSlidingLogSameMillisecond: costs admitted in one millisecond share one
// log entry, and a refund reaches into older entries when the newest is
// used up.
func TestSlidingLogSameMillisecond(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 5, Period: time.Second}
	s := runSteps(t, l, algorithms.State{}, []step{
		{cost: 2, allowed: true, remaining: 3, reset: time.Second},
		{cost: 2, allowed: true, remaining: 1, reset: time.Second},
		{advance: 10 * time.Millisecond, cost: 1, allowed: true, remaining: 0, reset: time.Second},
		// Three more need the t0 entry (4 units) to leave.
		{advance: time.Millisecond, cost: 3, allowed: false, remaining: 0, retry: 989 * time.Millisecond, reset: 999 * time.Millisecond},
		{cost: 1, allowed: false, remaining: 0, retry: 989 * time.Millisecond, reset: 999 * time.Millisecond},
		{cost: -2, allowed: true, remaining: 2, reset: 989 * time.Millisecond},
	})
	t0 := epoch.UnixMilli()
	if want := []algorithms.LogEntry{{At: t0, N: 3}}; !reflect.DeepEqual(s.Log, want) {
		t.Errorf("log: got %+v, want %+v", s.Log, want)
	}
}

// TestSlidingLogKeepsInput checks that an admit never writes into the
// log it was given: a caller may keep the old state and decide from it
// again.
func TestSlidingLogKeepsInput(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 10, Period: time.Second}
	s, _ := algorithms.Decide(l, algorithms.State{}, epoch, 1)
	s, _ = algorithms.Decide(l, s, epoch.Add(time.Millisecond), 1)
	before := append([]algorithms.LogEntry(nil), s.Log...)

	a, _ := algorithms.Decide(l, s, epoch.Add(time.Millisecond), 2)      // merges into the newest entry
	b, _ := algorithms.Decide(l, s, epoch.Add(5*time.Millisecond), 3)    // appends
	c, _ := algorithms.Decide(l, s, epoch.Add(1000*time.Millisecond), 4) // drops the oldest, appends
	_, _ = algorithms.Decide(l, s, epoch.Add(time.Millisecond), -2)      // refunds
	if !reflect.DeepEqual(s.Log, before) {
		t.Fatalf("input log changed: got %+v, want %+v", s.Log, before)
	}
	t0 := epoch.UnixMilli()
	for _, tc := range []struct {
		name string
		got  []algorithms.LogEntry
		want []algorithms.LogEntry
	}{
		{"merge", a.Log, []algorithms.LogEntry{{t0, 1}, {t0 + 1, 3}}},
		{"append", b.Log, []algorithms.LogEntry{{t0, 1}, {t0 + 1, 1}, {t0 + 5, 3}}},
		{"expire and append", c.Log, []algorithms.LogEntry{{t0 + 1, 1}, {t0 + 1000, 4}}},
	} {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.name, tc.got, tc.want)
		}
	}
}
