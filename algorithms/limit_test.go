package algorithms_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
)

func TestValidateRejects(t *testing.T) {
	const (
		tb  = algorithms.TokenBucket
		sw  = algorithms.SlidingWindow
		swl = algorithms.SlidingWindowLog
		fw  = algorithms.FixedWindow
	)
	maxWaitMs := algorithms.MaxWait.Milliseconds()
	for _, tc := range []struct {
		name  string
		limit algorithms.Limit
		field string // the error must name it
	}{
		{"no algorithm", algorithms.Limit{Requests: 1, Period: time.Second}, "algorithm"},
		{"unknown algorithm", algorithms.Limit{Algorithm: 9, Requests: 1, Period: time.Second}, "algorithm"},
		{"zero requests", algorithms.Limit{Algorithm: tb, Requests: 0, Period: time.Second}, "requests"},
		{"negative requests", algorithms.Limit{Algorithm: fw, Requests: -1, Period: time.Second}, "requests"},
		{"zero period", algorithms.Limit{Algorithm: sw, Requests: 1}, "period"},
		{"negative period", algorithms.Limit{Algorithm: sw, Requests: 1, Period: -time.Second}, "period"},
		{"sub-millisecond period", algorithms.Limit{Algorithm: fw, Requests: 1, Period: 1500 * time.Microsecond}, "period"},
		{"period below a millisecond", algorithms.Limit{Algorithm: fw, Requests: 1, Period: time.Nanosecond}, "period"},
		{"negative burst", algorithms.Limit{Algorithm: tb, Requests: 1, Period: time.Second, Burst: -1}, "burst"},
		{"token bucket too fine", algorithms.Limit{Algorithm: tb, Requests: 1_000_000_001, Period: time.Second, Burst: algorithms.MaxScaled/1000 + 1}, "burst"},
		{"token bucket too fine, scale 1", algorithms.Limit{Algorithm: tb, Requests: 1 << 20, Period: time.Millisecond, Burst: algorithms.MaxScaled + 1}, "burst"},
		{"log above its cap", algorithms.Limit{Algorithm: swl, Requests: algorithms.MaxLogRequests + 1, Period: time.Second}, "requests"},
		{"window too many requests", algorithms.Limit{Algorithm: sw, Requests: algorithms.MaxScaled/1000 + 1, Period: time.Second}, "requests"},
		{"fixed window too many requests", algorithms.Limit{Algorithm: fw, Requests: algorithms.MaxScaled + 1, Period: time.Millisecond}, "requests"},
		// Regression: these passed Validate and then overflowed
		// time.Duration (a negative RetryAfter, a wrapped ResetAfter).
		{"token bucket refill longer than MaxWait", algorithms.Limit{Algorithm: tb, Requests: 1, Period: 1024 * time.Millisecond, Burst: 1 << 40}, "burst"},
		{"token bucket refill 1ms longer than MaxWait", algorithms.Limit{Algorithm: tb, Requests: 1000, Period: time.Second, Burst: 1<<42 + 1}, "burst"},
		{"sliding window period above MaxWait/2", algorithms.Limit{Algorithm: sw, Requests: 1, Period: time.Duration(maxWaitMs/2+1) * time.Millisecond}, "period"},
		{"fixed window period above MaxWait", algorithms.Limit{Algorithm: fw, Requests: 1, Period: time.Duration(maxWaitMs+1) * time.Millisecond}, "period"},
		{"log period above MaxWait", algorithms.Limit{Algorithm: swl, Requests: 1, Period: 200 * 365 * 24 * time.Hour}, "period"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.limit.Validate()
			if !errors.Is(err, algorithms.ErrInvalidLimit) {
				t.Fatalf("Validate(%+v): got %v, want an error wrapping ErrInvalidLimit", tc.limit, err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("Validate(%+v): got %q, want it to name %q", tc.limit, err, tc.field)
			}
		})
	}
}

// goodLimits are valid limits at and near every bound.
func goodLimits() []algorithms.Limit {
	const (
		tb  = algorithms.TokenBucket
		sw  = algorithms.SlidingWindow
		swl = algorithms.SlidingWindowLog
		fw  = algorithms.FixedWindow
	)
	maxWait := algorithms.MaxWait
	return []algorithms.Limit{
		{Algorithm: tb, Requests: 1, Period: time.Millisecond},
		{Algorithm: tb, Requests: 3, Period: time.Minute},
		{Algorithm: tb, Requests: 10, Period: time.Second, Burst: 200},
		{Algorithm: tb, Requests: 1000, Period: time.Second, Burst: 1 << 42},                              // refills in MaxWait
		{Algorithm: tb, Requests: 1 << 20, Period: time.Millisecond, Burst: algorithms.MaxScaled},         // scale 1
		{Algorithm: tb, Requests: 1_000_000_001, Period: time.Second, Burst: algorithms.MaxScaled / 1000}, // scale 1000
		{Algorithm: tb, Requests: algorithms.MaxScaled, Period: time.Millisecond},
		{Algorithm: tb, Requests: 1, Period: maxWait},
		{Algorithm: tb, Requests: 1, Period: 1024 * time.Millisecond, Burst: algorithms.MaxWait.Milliseconds() / 1024},
		{Algorithm: sw, Requests: 1, Period: time.Millisecond},
		{Algorithm: sw, Requests: algorithms.MaxScaled / 1000, Period: time.Second},
		{Algorithm: sw, Requests: 1, Period: maxWait / 2},
		{Algorithm: swl, Requests: algorithms.MaxLogRequests, Period: time.Hour},
		{Algorithm: swl, Requests: 1, Period: maxWait},
		{Algorithm: fw, Requests: algorithms.MaxScaled, Period: time.Millisecond},
		{Algorithm: fw, Requests: 1, Period: maxWait},
		{Algorithm: fw, Requests: 100, Period: 24 * time.Hour},
	}
}

func TestValidateAccepts(t *testing.T) {
	for _, l := range goodLimits() {
		if err := l.Validate(); err != nil {
			t.Errorf("Validate(%+v): got %v, want nil", l, err)
		}
	}
}

// TestDecideAtTheBounds spends a valid limit at its bounds down to nothing,
// denies, refunds and moves the clock back by MaxWait: every number stays
// in range (no overflow of the scaled integers or of time.Duration).
func TestDecideAtTheBounds(t *testing.T) {
	for _, l := range goodLimits() {
		c := l.Capacity()
		now := epoch
		s := algorithms.State{}
		for i, op := range []struct {
			advance time.Duration
			cost    int64
		}{
			{0, c}, {0, 1}, {0, c}, {time.Millisecond, -c / 2}, {0, c / 2}, {0, c}, {0, c + 1},
			{-algorithms.MaxWait, 0}, {0, 1}, {0, c}, {algorithms.MaxWait, 0}, {time.Millisecond, c},
		} {
			now = now.Add(op.advance)
			next, d := algorithms.Decide(l, s, now, op.cost)
			if err := checkDecision(l, op.cost, d); err != nil {
				t.Errorf("%v %d/%v burst %d, op %d (cost %d): %v", l.Algorithm, l.Requests, l.Period, l.Burst, i, op.cost, err)
			}
			s = next
		}
	}
}

// TestDecideOverCapacity: a cost above the capacity is a deny with
// RetryAfter Never, reports what a peek reports, and charges nothing.
func TestDecideOverCapacity(t *testing.T) {
	for _, alg := range algorithms.All() {
		l := algorithms.Limit{Algorithm: alg, Requests: 5, Period: time.Second}
		s, _ := algorithms.Decide(l, algorithms.State{}, epoch, 2)
		_, peek := algorithms.Decide(l, s, epoch, 0)
		for _, cost := range []int64{6, 100, 1 << 62} {
			next, d := algorithms.Decide(l, s, epoch, cost)
			want := peek
			want.Allowed, want.RetryAfter, want.Wait = false, algorithms.Never, 0
			if d != want {
				t.Errorf("%v cost %d: got %+v, want %+v", alg, cost, d, want)
			}
			if !sameState(next, s) {
				t.Errorf("%v cost %d: state changed: got %+v, want %+v", alg, cost, next, s)
			}
		}
	}
}

func TestAlgorithmNames(t *testing.T) {
	for _, a := range algorithms.All() {
		if !a.Valid() {
			t.Errorf("%v: Valid() = false", a)
		}
		got, err := algorithms.ParseAlgorithm(a.String())
		if err != nil || got != a {
			t.Errorf("ParseAlgorithm(%q): got %v, %v, want %v", a.String(), got, err, a)
		}
	}
	for _, name := range []string{"", "leaky", "TOKEN_BUCKET", "algorithm(1)"} {
		if got, err := algorithms.ParseAlgorithm(name); err == nil {
			t.Errorf("ParseAlgorithm(%q): got %v, want an error", name, got)
		}
	}
	if got, want := algorithms.Algorithm(7).String(), "algorithm(7)"; got != want {
		t.Errorf("Algorithm(7).String(): got %q, want %q", got, want)
	}
	if algorithms.Unspecified.Valid() {
		t.Error("Unspecified.Valid(): got true, want false")
	}
}

func TestCapacity(t *testing.T) {
	for _, tc := range []struct {
		limit algorithms.Limit
		want  int64
	}{
		{algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Burst: 0}, 10},
		{algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Burst: 25}, 25},
		{algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Burst: 3}, 3},
		{algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 10, Burst: 25}, 10},
		{algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 10, Burst: 25}, 10},
		{algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 10, Burst: 25}, 10},
		{algorithms.Limit{Algorithm: algorithms.LeakyBucket, Requests: 10}, 10},
		{algorithms.Limit{Algorithm: algorithms.LeakyBucket, Requests: 10, Burst: 3}, 3},
	} {
		if got := tc.limit.Capacity(); got != tc.want {
			t.Errorf("%+v.Capacity(): got %d, want %d", tc.limit, got, tc.want)
		}
	}
}
