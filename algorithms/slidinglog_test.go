package algorithms_test

import (
	"math/rand/v2"
	"reflect"
	"slices"
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

// liveUnits lists the units of a log state that are not gone (above the
// floor), oldest first.
func liveUnits(s algorithms.State) []int64 {
	var out []int64
	n := int64(len(s.Log))
	for i := range n {
		if v := s.Log[(s.A+i)%n]; v > s.B && v != algorithms.EmptySlot {
			out = append(out, v)
		}
	}
	return out
}

// TestSlidingLogSameMillisecond: costs admitted in one millisecond are
// units at that millisecond, and a refund reaches into older ones when the
// newest are used up.
func TestSlidingLogSameMillisecond(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 5, Period: time.Second}
	s := runSteps(t, l, algorithms.State{}, []step{
		{cost: 2, allowed: true, remaining: 3, reset: time.Second},
		{cost: 2, allowed: true, remaining: 1, reset: time.Second},
		{advance: 10 * time.Millisecond, cost: 1, allowed: true, remaining: 0, reset: time.Second},
		// Three more need the t0 units (4) to leave.
		{advance: time.Millisecond, cost: 3, allowed: false, remaining: 0, retry: 989 * time.Millisecond, reset: 999 * time.Millisecond},
		{cost: 1, allowed: false, remaining: 0, retry: 989 * time.Millisecond, reset: 999 * time.Millisecond},
		{cost: -2, allowed: true, remaining: 2, reset: 989 * time.Millisecond},
	})
	t0 := epoch.UnixMilli()
	if got, want := liveUnits(s), []int64{t0, t0, t0}; !reflect.DeepEqual(got, want) {
		t.Errorf("log: got %v, want %v", got, want)
	}
}

// TestSlidingLogKeepsInput checks that DecideAt never writes into the ring
// it was given (a caller may keep the old state and decide from it again),
// while Apply writes into it and Undo takes the write back.
func TestSlidingLogKeepsInput(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 10, Period: time.Second}
	s, _ := algorithms.Decide(l, algorithms.State{}, epoch, 1)
	s, _ = algorithms.Decide(l, s, epoch.Add(time.Millisecond), 1)
	before := slices.Clone(s.Log)

	a, _ := algorithms.Decide(l, s, epoch.Add(time.Millisecond), 2)      // same millisecond
	b, _ := algorithms.Decide(l, s, epoch.Add(5*time.Millisecond), 3)    // later
	c, _ := algorithms.Decide(l, s, epoch.Add(1000*time.Millisecond), 4) // the oldest has left
	_, _ = algorithms.Decide(l, s, epoch.Add(time.Millisecond), -2)      // refunds
	if !reflect.DeepEqual(s.Log, before) {
		t.Fatalf("input log changed: got %v, want %v", s.Log, before)
	}
	t0 := epoch.UnixMilli()
	for _, tc := range []struct {
		name string
		got  []int64
		want []int64
	}{
		{"same ms", liveUnits(a), []int64{t0, t0 + 1, t0 + 1, t0 + 1}},
		{"later", liveUnits(b), []int64{t0, t0 + 1, t0 + 5, t0 + 5, t0 + 5}},
		{"expire and admit", liveUnits(c), []int64{t0 + 1, t0 + 1000, t0 + 1000, t0 + 1000, t0 + 1000}},
	} {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, tc.got, tc.want)
		}
	}

	// In place: the same ring is written, and Undo restores it.
	in := s
	var u algorithms.Undo
	if d := algorithms.Apply(l, &in, algorithms.Request{NowMs: t0 + 5, Cost: 3}, &u); !d.Allowed {
		t.Fatalf("Apply: %+v", d)
	}
	if &in.Log[0] != &s.Log[0] || reflect.DeepEqual(s.Log, before) {
		t.Fatalf("Apply did not write in place: %v (was %v)", in.Log, before)
	}
	if got, want := liveUnits(in), liveUnits(b); !reflect.DeepEqual(got, want) {
		t.Errorf("Apply: got %v, want %v as DecideAt", got, want)
	}
	u.Revert()
	if !reflect.DeepEqual(s.Log, before) {
		t.Fatalf("after Revert: got %v, want %v", s.Log, before)
	}
}

// refEntry is one entry of the reference log: the cost admitted at one ms.
type refEntry struct{ At, N int64 }

// refDecide is the sliding window log as it was first written: a list of
// entries, one per millisecond, scanned whole on every decision. The ring
// must decide exactly as it does.
func refDecide(l algorithms.Limit, log []refEntry, now, cost int64) ([]refEntry, algorithms.Decision) {
	c := l.Requests
	if cost > c {
		_, d := refDecide(l, log, now, 0)
		d.Allowed, d.RetryAfter = false, algorithms.Never
		return log, d
	}
	cost = max(cost, -c)
	w := l.Period.Milliseconds()
	at := now
	if n := len(log); n > 0 {
		at = max(at, log[n-1].At)
	}
	first := 0
	for first < len(log) && log[first].At <= at-w {
		first++
	}
	live := log[first:]
	sum := int64(0)
	for _, e := range live {
		sum += e.N
	}
	d := algorithms.Decision{Allowed: true, Limit: l.Requests}
	var next []refEntry
	switch {
	case cost > 0 && sum+cost > l.Requests:
		d.Allowed = false
		need := sum + cost - l.Requests
		for _, e := range live {
			if need -= e.N; need <= 0 {
				d.RetryAfter = time.Duration(e.At+w-now) * time.Millisecond
				break
			}
		}
	case cost > 0:
		next = append(slices.Clone(live), refEntry{at, cost})
		sum += cost
	case cost < 0:
		next = slices.Clone(live)
		for refund := -cost; refund > 0 && len(next) > 0; {
			n := len(next) - 1
			take := min(refund, next[n].N)
			next[n].N -= take
			refund -= take
			sum -= take
			if next[n].N == 0 {
				next = next[:n]
			}
		}
	default:
		next = live
	}
	d.Remaining = max(0, l.Requests-sum)
	if d.Allowed {
		if n := len(next); n > 0 {
			d.ResetAfter = time.Duration(next[n-1].At+w-now) * time.Millisecond
		}
	} else if n := len(live); n > 0 {
		d.ResetAfter = time.Duration(live[n-1].At+w-now) * time.Millisecond
	}
	d.TTL = d.ResetAfter
	if !d.Allowed || cost == 0 {
		return log, d
	}
	return next, d
}

// TestSlidingLogMatchesReference plays random traces (bursts, refunds, the
// clock going back, costs above the limit, limits changing under the key)
// through DecideAt, Apply and Peek and through refDecide: every
// decision must be identical, and the ring never larger than the largest
// limit used.
func TestSlidingLogMatchesReference(t *testing.T) {
	r := testRand(t)
	ms := time.Millisecond
	limits := []algorithms.Limit{
		{Requests: 5, Period: time.Second},
		{Requests: 3, Period: 250 * ms},
		{Requests: 40, Period: 7 * time.Second},
		{Requests: 1, Period: ms},
		{Requests: 200, Period: time.Minute},
		{Requests: 37, Period: 20 * ms},
	}
	for i := range limits {
		limits[i].Algorithm = algorithms.SlidingWindowLog
	}
	for round := range 300 {
		l := limits[r.IntN(len(limits))]
		largest := l.Requests
		var ref []refEntry
		var pure, owned algorithms.State
		var u algorithms.Undo
		now := int64(r.IntN(3)) * (1 << 40) // sometimes Unix 0: times near 0 must work
		for step := range 300 {
			if r.IntN(25) == 0 {
				l = limits[r.IntN(len(limits))]
				largest = max(largest, l.Requests)
			}
			w := l.Period.Milliseconds()
			switch x := r.IntN(100); {
			case x < 35:
			case x < 75:
				now += r.Int64N(max(1, 2*w/l.Requests) + 1)
			case x < 90:
				now += r.Int64N(2*w + 1)
			default:
				now = max(0, now-r.Int64N(2*w+1))
			}
			cost := randLogCost(r, l.Requests)
			var want, got algorithms.Decision
			ref, want = refDecide(l, ref, now, cost)
			pure, got = algorithms.DecideAt(l, pure, algorithms.Request{NowMs: now, Cost: cost})
			if got != want {
				t.Fatalf("round %d step %d (%s, now %d, cost %d): DecideAt %+v, reference %+v", round, step, desc(l), now, cost, got, want)
			}
			if e := algorithms.Peek(l, owned, algorithms.Request{NowMs: now, Cost: cost}); e != want {
				t.Fatalf("round %d step %d (%s, now %d, cost %d): Peek %+v, reference %+v", round, step, desc(l), now, cost, e, want)
			}
			// Apply, sometimes reverted and applied again.
			if r.IntN(8) == 0 {
				saved := owned
				algorithms.Apply(l, &owned, algorithms.Request{NowMs: now, Cost: cost}, &u)
				u.Revert()
				owned = saved
			}
			if a := algorithms.Apply(l, &owned, algorithms.Request{NowMs: now, Cost: cost}, &u); a != want {
				t.Fatalf("round %d step %d (%s, now %d, cost %d): Apply %+v, reference %+v", round, step, desc(l), now, cost, a, want)
			}
			u.Reset()
			if int64(len(pure.Log)) > largest || int64(len(owned.Log)) > largest {
				t.Fatalf("round %d step %d: rings of %d and %d slots, above the largest limit %d", round, step, len(pure.Log), len(owned.Log), largest)
			}
		}
	}
}

// randLogCost draws a cost for a log of limit c: mostly single units, some
// bursts, peeks, refunds and costs above the limit.
func randLogCost(r *rand.Rand, c int64) int64 {
	switch x := r.IntN(100); {
	case x < 50:
		return 1
	case x < 70:
		return 1 + r.Int64N(c)
	case x < 78:
		return 0
	case x < 93:
		return -1 - r.Int64N(c+1)
	default:
		return c + 1
	}
}
