package simulate

import (
	"slices"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
)

func limitOf(a algorithms.Algorithm, requests int64, period time.Duration) algorithms.Limit {
	return algorithms.Limit{Algorithm: a, Requests: requests, Period: period}
}

func mustJoin(t *testing.T, period time.Duration, segs ...func() (Segment, error)) Traffic {
	t.Helper()
	var ss []Segment
	for _, f := range segs {
		s, err := f()
		if err != nil {
			t.Fatal(err)
		}
		ss = append(ss, s)
	}
	tr, err := Join(period, ss...)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestEdgeAttack: the window-edge attack (the limit just before a
// window edge and again just after) gets twice the limit through within
// edgeGap on a fixed window, and only the limit on every other algorithm;
// a leaky bucket queues them all and lets one start within edgeGap, the
// rest a slot apart (its busiest period still holds the limit).
func TestEdgeAttack(t *testing.T) {
	for _, tc := range []struct {
		requests int64
		period   time.Duration
	}{
		{10, time.Minute},
		{10, 2 * time.Second}, // twice the limit within a 2 s window
		{5, 15 * time.Minute},
		{1, 2 * time.Millisecond}, // the smallest window with an edge attack: edgeGap is 1ms
	} {
		for _, a := range algorithms.All() {
			l := limitOf(a, tc.requests, tc.period)
			edge := 3 * tc.period
			tr := mustJoin(t, tc.period, func() (Segment, error) { return Edge(l, edge) })
			r, err := Run(l, tr)
			if err != nil {
				t.Fatal(err)
			}
			want := int(tc.requests)
			if a.Facts().Afresh { // two windows back to back across the edge
				want *= 2
			}
			gap := edgeGap(tc.period)
			near := want
			if a.Facts().Waits { // starts spaced one slot apart
				near = 1
			}
			if got := admittedBetween(r, edge-gap, edge+time.Millisecond); got != near {
				t.Errorf("%v %d/%v: admitted %d within %v of the edge, want %d", a, tc.requests, tc.period, got, gap, near)
			}
			if got, _ := r.Busiest(); got != want {
				t.Errorf("%v %d/%v: busiest period %d, want %d", a, tc.requests, tc.period, got, want)
			}
			if r.Admitted+r.Denied != 2*int(tc.requests) || len(r.Requests) != 2*int(tc.requests) {
				t.Errorf("%v: %d admitted + %d denied of %d requests, want %d in all", a, r.Admitted, r.Denied, len(r.Requests), 2*tc.requests)
			}
		}
	}
}

// TestRunCounts: admitted counts of known patterns under 10/1m, worked
// out by hand from each algorithm's rule (algorithms/doc.go).
func TestRunCounts(t *testing.T) {
	const (
		tb  = algorithms.TokenBucket
		sw  = algorithms.SlidingWindow
		swl = algorithms.SlidingWindowLog
		fw  = algorithms.FixedWindow
		lb  = algorithms.LeakyBucket
	)
	steady := func(n int64, per, at, length time.Duration) func() (Segment, error) {
		return func() (Segment, error) { return Steady(n, per, at, length) }
	}
	burst := func(n int64, at time.Duration) func() (Segment, error) {
		return func() (Segment, error) { return Burst(n, at) }
	}
	for _, tc := range []struct {
		name    string
		traffic []func() (Segment, error)
		burst   int64 // token bucket capacity; 0: the limit
		want    map[algorithms.Algorithm]int
	}{{
		// One request every 6s, exactly the rate. The sliding window
		// counter denies the one at 1m0s: the previous window's 10 still
		// weigh 10 at the very start of the next (10·(60−0)/60); at 1m6s
		// they weigh 9 and it admits again. Everything else admits all 20.
		name:    "at the rate",
		traffic: []func() (Segment, error){steady(10, time.Minute, 0, 2*time.Minute)},
		want:    map[algorithms.Algorithm]int{tb: 20, sw: 19, swl: 20, fw: 20, lb: 20},
	}, {
		// A burst above the limit: every algorithm admits the limit,
		// the token bucket its burst.
		name:    "burst of 15",
		traffic: []func() (Segment, error){burst(15, 30*time.Second)},
		want:    map[algorithms.Algorithm]int{tb: 10, sw: 10, swl: 10, fw: 10, lb: 10},
	}, {
		name:    "burst of 15, bucket of 12",
		traffic: []func() (Segment, error){burst(15, 30*time.Second)},
		burst:   12,
		want:    map[algorithms.Algorithm]int{tb: 12, sw: 10, swl: 10, fw: 10, lb: 10},
	}, {
		// Twice the rate for 2m (one request every 3s, 40 in all). The
		// leaky bucket (a queue of 10 slots of 6s) matches the token
		// bucket in every case here, as GCRA says it must: it queues
		// the first 19 (its end runs 6s a request, the clock 3s), then
		// one every other arrival. Fixed
		// window and log: 10 a window. Token bucket: the 10 it holds, then
		// one every 6s: 10 + ⌊117/6⌋ = 29. Sliding window counter: 10 in
		// the first window (0s…27s); in the second, weight 10·(60−e)/60 +
		// curr + 1 ≤ 10 first holds at e = 6s and again every 6s
		// thereafter, which is one every other arrival: 9 (66s…114s).
		name:    "twice the rate",
		traffic: []func() (Segment, error){steady(20, time.Minute, 0, 2*time.Minute)},
		want:    map[algorithms.Algorithm]int{tb: 29, sw: 19, swl: 20, fw: 20, lb: 29},
	}, {
		// Bursts of 10 at 55s and 1m55s: each lands in its own fixed
		// window and log window, and the bucket has refilled; the
		// sliding window counter still weighs the first burst at
		// 10·(60−55)/60 ≈ 0.83 in the second, so it admits 9.
		name:    "bursts a period apart",
		traffic: []func() (Segment, error){burst(10, 55*time.Second), burst(10, 115*time.Second)},
		want:    map[algorithms.Algorithm]int{tb: 20, sw: 19, swl: 20, fw: 20, lb: 20},
	}, {
		// The sliding window counter's estimate assumes the previous
		// window's requests were spread evenly. Bunched at its very end,
		// they weigh less than they should: after 10 at 59s it admits 9
		// of a steady stream within the next minute, 19 in one minute,
		// where the log admits none. (In the second window it admits
		// while curr + 10·(60−e)/60 + 1 ≤ 10: from e = 6s, one in every
		// 6s.) The token bucket, refilled one every 6s, also admits 9.
		name:    "burst at the end of a window, then twice the rate",
		traffic: []func() (Segment, error){burst(10, 59*time.Second), steady(20, time.Minute, time.Minute, time.Minute)},
		want:    map[algorithms.Algorithm]int{tb: 19, sw: 19, swl: 10, fw: 20, lb: 19},
	}} {
		for _, a := range algorithms.All() {
			l := limitOf(a, 10, time.Minute)
			if a == algorithms.TokenBucket {
				l.Burst = tc.burst
			}
			r, err := Run(l, mustJoin(t, time.Minute, tc.traffic...))
			if err != nil {
				t.Fatal(err)
			}
			want, ok := tc.want[a]
			if !ok {
				t.Fatalf("%s: no expected count for %v", tc.name, a)
			}
			if r.Admitted != want || r.Admitted+r.Denied != len(r.Requests) {
				t.Errorf("%s, %v: admitted %d, denied %d; want admitted %d", tc.name, a, r.Admitted, r.Denied, want)
			}
		}
	}
}

func TestSteadyArrivals(t *testing.T) {
	ms := func(v ...int64) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	for _, tc := range []struct {
		requests           int64
		period, at, length time.Duration
		want               []time.Duration
	}{
		{3, time.Second, 0, 2 * time.Second, ms(0, 333, 666, 1000, 1333, 1666)},
		{2, time.Second, 5 * time.Second, 1500 * time.Millisecond, ms(5000, 5500, 6000)},
		{1, time.Minute, 0, time.Minute, ms(0)},
		{1000, time.Millisecond, 0, 2 * time.Millisecond, slices.Concat(slices.Repeat(ms(0), 1000), slices.Repeat(ms(1), 1000))},
	} {
		s, err := Steady(tc.requests, tc.period, tc.at, tc.length)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(s.Arrivals, tc.want) || s.End != tc.at+tc.length {
			t.Errorf("Steady(%d, %v, %v, %v): got %v ending %v, want %v ending %v", tc.requests, tc.period, tc.at, tc.length, s.Arrivals, s.End, tc.want, tc.at+tc.length)
		}
	}
}

func TestSegmentErrors(t *testing.T) {
	l := limitOf(algorithms.FixedWindow, 10, time.Minute)
	for _, tc := range []struct {
		name string
		f    func() (Segment, error)
	}{
		{"steady no requests", func() (Segment, error) { return Steady(0, time.Second, 0, time.Second) }},
		{"steady sub-ms period", func() (Segment, error) { return Steady(1, time.Microsecond, 0, time.Second) }},
		{"steady no length", func() (Segment, error) { return Steady(1, time.Second, 0, 0) }},
		{"steady negative start", func() (Segment, error) { return Steady(1, time.Second, -time.Second, time.Second) }},
		{"steady fractional start", func() (Segment, error) { return Steady(1, time.Second, 1500*time.Microsecond, time.Second) }},
		{"steady too many", func() (Segment, error) { return Steady(1000, time.Millisecond, 0, time.Hour) }},
		{"steady too many, huge rate", func() (Segment, error) { return Steady(1<<62, time.Millisecond, 0, time.Hour) }},
		{"steady too long", func() (Segment, error) { return Steady(1, time.Hour, 0, 400*24*time.Hour) }},
		{"burst of 0", func() (Segment, error) { return Burst(0, 0) }},
		{"burst too big", func() (Segment, error) { return Burst(MaxRequests+1, 0) }},
		{"burst negative time", func() (Segment, error) { return Burst(1, -time.Millisecond) }},
		{"edge not at an edge", func() (Segment, error) { return Edge(l, 90*time.Second) }},
		{"edge at 0", func() (Segment, error) { return Edge(l, 0) }},
		{"edge in a 1ms window", func() (Segment, error) {
			return Edge(limitOf(algorithms.FixedWindow, 1, time.Millisecond), time.Millisecond)
		}},
	} {
		if _, err := tc.f(); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}

func TestJoin(t *testing.T) {
	a, _ := Burst(2, 70*time.Second)
	b, _ := Steady(1, 20*time.Second, 0, time.Minute)
	tr, err := Join(time.Minute, a, b)
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{0, 20 * time.Second, 40 * time.Second, 70 * time.Second, 70 * time.Second}
	if !slices.Equal(tr.Arrivals, want) || tr.Span != 2*time.Minute {
		t.Errorf("got %v over %v, want %v over 2m", tr.Arrivals, tr.Span, want)
	}
	big, _ := Burst(MaxRequests, 0)
	for _, tc := range []struct {
		name   string
		period time.Duration
		segs   []Segment
	}{
		{"nothing", time.Minute, nil},
		{"too many", time.Minute, []Segment{big, a}},
		{"no period", 0, []Segment{a}},
		{"too long", 400 * 24 * time.Hour, []Segment{a}},
	} {
		if _, err := Join(tc.period, tc.segs...); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}

func TestRunErrors(t *testing.T) {
	ok := Traffic{Arrivals: []time.Duration{0}, Span: time.Minute}
	for _, tc := range []struct {
		name string
		l    algorithms.Limit
		tr   Traffic
	}{
		{"invalid limit", limitOf(algorithms.Unspecified, 10, time.Minute), ok},
		{"no span", limitOf(algorithms.FixedWindow, 10, time.Minute), Traffic{Arrivals: []time.Duration{0}}},
		{"arrival at the span", limitOf(algorithms.FixedWindow, 10, time.Minute), Traffic{Arrivals: []time.Duration{time.Minute}, Span: time.Minute}},
		{"out of order", limitOf(algorithms.FixedWindow, 10, time.Minute), Traffic{Arrivals: []time.Duration{2 * time.Second, time.Second}, Span: time.Minute}},
		{"negative", limitOf(algorithms.FixedWindow, 10, time.Minute), Traffic{Arrivals: []time.Duration{-time.Second}, Span: time.Minute}},
	} {
		if _, err := Run(tc.l, tc.tr); err == nil {
			t.Errorf("%s: Run succeeded, want an error", tc.name)
		}
	}
}

// TestTrailing: admits leave the trailing period exactly one period after
// they entered it, before an admit at that same instant enters.
func TestTrailing(t *testing.T) {
	r := Result{
		Limit: limitOf(algorithms.FixedWindow, 3, 10*time.Second),
		Span:  40 * time.Second,
		Requests: []Request{
			{At: 0, Allowed: true}, {At: 0, Allowed: true}, {At: 5 * time.Second, Allowed: false},
			{At: 8 * time.Second, Allowed: true}, {At: 10 * time.Second, Allowed: true},
			{At: 25 * time.Second, Allowed: true},
		},
	}
	want := []Step{
		{0, 2},
		{8 * time.Second, 3},
		{10 * time.Second, 2}, // the two at 0 leave, the one at 10s enters
		{18 * time.Second, 1},
		{20 * time.Second, 0},
		{25 * time.Second, 1},
		{35 * time.Second, 0},
	}
	if got := r.Trailing(); !slices.Equal(got, want) {
		t.Errorf("Trailing: got %v, want %v", got, want)
	}
	if n, at := r.Busiest(); n != 3 || at != 8*time.Second {
		t.Errorf("Busiest: got %d at %v, want 3 at 8s", n, at)
	}
}

// TestRunLeakyBucket: a leaky bucket admits a burst into its queue and
// lets it through one slot at a time: the chart counts admitted requests
// at their start, spaced a slot apart, and the span grows to hold the last
// start.
func TestRunLeakyBucket(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.LeakyBucket, Requests: 10, Period: time.Minute}
	arrivals := make([]time.Duration, 15)
	for i := range arrivals {
		arrivals[i] = 30 * time.Second // 15 at once; the queue holds 10
	}
	r, err := Run(l, Traffic{Arrivals: arrivals, Span: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if r.Admitted != 10 || r.Denied != 5 {
		t.Fatalf("admitted %d, denied %d; want 10 and 5", r.Admitted, r.Denied)
	}
	for i, q := range r.Requests[:10] {
		if want := 30*time.Second + time.Duration(i)*6*time.Second; q.Start() != want {
			t.Errorf("request %d starts at %v, want %v", i, q.Start(), want)
		}
	}
	if r.Span != 2*time.Minute {
		t.Errorf("span %v, want 2m (the last start, 84s, rounded up to a period)", r.Span)
	}
	if got := r.LongestWait(); got != 54*time.Second {
		t.Errorf("longest wait %v, want 54s", got)
	}
	if n, at := r.Busiest(); n != 10 || at != 84*time.Second {
		t.Errorf("busiest minute %d at %v, want 10 (the limit) at 84s: the starts 30s..84s, a slot every 6s", n, at)
	}
	if got := admittedBetween(r, time.Minute, 2*time.Minute); got != 5 {
		t.Errorf("admitted (started) in the second minute: %d, want 5", got)
	}
}

// admittedBetween counts the admitted requests of r that start at times in
// [from, to).
func admittedBetween(r Result, from, to time.Duration) int {
	n := 0
	for _, q := range r.Requests {
		if q.Allowed && q.Start() >= from && q.Start() < to {
			n++
		}
	}
	return n
}
