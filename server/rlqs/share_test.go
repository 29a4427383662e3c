package rlqs

import (
	"testing"
	"time"

	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
)

func totals(n, milliRPS int64) store.DemandTotal {
	return store.DemandTotal{Reporters: n, MilliRPS: milliRPS}
}

func TestShare(t *testing.T) {
	p := ShareParams{Floor: DefaultFloor, Cap: DefaultCap}
	for _, tc := range []struct {
		name   string
		budget int64
		period time.Duration
		total  store.DemandTotal
		own    int64
		want   int64
	}{
		{"alone", 100, time.Minute, totals(1, 10_000), 10_000, 100},
		{"equal halves", 100, time.Minute, totals(2, 20_000), 10_000, 50},
		{"proportional", 100, time.Minute, totals(2, 40_000), 30_000, 72},
		{"idle gets the floor", 100, time.Minute, totals(2, 10_000), 0, 5},
		{"nobody demands: even split", 100, time.Minute, totals(4, 0), 0, 25},
		{"cap: twice the demand over the period", 1000, time.Minute, totals(1, 1000), 1000, 120},
		{"cap never below the floor", 1000, time.Minute, totals(2, 1000), 1, 50},
		{"at least one when budget >= reporters", 3, time.Minute, totals(3, 3000), 1, 1},
		{"zero budget", 0, time.Minute, totals(1, 1000), 1000, 0},
		{"own above total (stale total) is clamped", 100, time.Minute, totals(2, 1000), 5000, 95},
	} {
		if got := p.Share(tc.budget, tc.period, tc.total, tc.own); got != tc.want {
			t.Errorf("%s: Share = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestShareSumsWithinBudget: shares of reporters with agreeing totals never
// add up to more than the budget, but for the minimum of 1 each.
func TestShareSumsWithinBudget(t *testing.T) {
	p := ShareParams{Floor: DefaultFloor, Cap: DefaultCap}
	demands := [][]int64{{1, 1, 1}, {1000, 5, 0}, {7_000, 13_000, 29_000, 1}, {0, 0}, {999_999, 1}}
	for _, budget := range []int64{5, 10, 100, 1234, 1_000_000} {
		for _, ds := range demands {
			var total int64
			for _, d := range ds {
				total += d
			}
			var sum int64
			for _, d := range ds {
				sum += p.Share(budget, time.Hour, totals(int64(len(ds)), total), d)
			}
			if sum > budget+int64(len(ds)) || (budget >= 100 && sum > budget) {
				t.Errorf("budget %d, demands %v: shares sum to %d", budget, ds, sum)
			}
		}
	}
}

func TestStrategy(t *testing.T) {
	perMinute := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 100, Period: time.Minute}
	if s := Strategy(perMinute, 40).GetRequestsPerTimeUnit(); s.GetRequestsPerTimeUnit() != 40 || s.GetTimeUnit() != typev3.RateLimitUnit_MINUTE {
		t.Errorf("per minute: %v", s)
	}
	if s := Strategy(perMinute, 0); s.GetBlanketRule() != typev3.RateLimitStrategy_DENY_ALL || s.GetStrategy() == nil {
		t.Errorf("share 0: %v, want DENY_ALL", s)
	}
	odd := algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 100, Period: 10 * time.Second}
	if tb := Strategy(odd, 30).GetTokenBucket(); tb.GetMaxTokens() != 30 || tb.GetTokensPerFill().GetValue() != 30 || tb.GetFillInterval().AsDuration() != 10*time.Second {
		t.Errorf("10s period: %v", tb)
	}
	bucket := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 100, Period: time.Second, Burst: 200}
	if tb := Strategy(bucket, 50).GetTokenBucket(); tb.GetMaxTokens() != 100 || tb.GetTokensPerFill().GetValue() != 50 || tb.GetFillInterval().AsDuration() != time.Second {
		t.Errorf("token bucket with burst: %v", tb)
	}
}
