package algorithms_test

import (
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
)

// TestTokenBucketGrpcurlExample is the README's grpcurl session: 3 requests
// per minute, burst 3 (the default), so a token comes back every 20s.
func TestTokenBucketGrpcurlExample(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 3, Period: time.Minute}
	runSteps(t, l, algorithms.State{}, []step{
		{cost: 1, allowed: true, remaining: 2, reset: 20 * time.Second},
		{cost: 1, allowed: true, remaining: 1, reset: 40 * time.Second},
		{cost: 1, allowed: true, remaining: 0, reset: time.Minute},
		{cost: 1, allowed: false, remaining: 0, retry: 20 * time.Second, reset: time.Minute},
		{advance: 20*time.Second - time.Millisecond, cost: 1, allowed: false, remaining: 0, retry: time.Millisecond, reset: 40*time.Second + time.Millisecond},
		{advance: time.Millisecond, cost: 1, allowed: true, remaining: 0, reset: time.Minute},
		{advance: time.Minute, cost: 0, allowed: true, remaining: 3, reset: 0},
	})
}

// TestTokenBucketSteps walks a bucket of 20 refilled at 10/s (one token per
// 100ms) through partial refills, peeks, refunds and oversized costs.
func TestTokenBucketSteps(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Second, Burst: 20}
	runSteps(t, l, algorithms.State{}, []step{
		{cost: 20, allowed: true, remaining: 0, reset: 2 * time.Second},
		{cost: 1, allowed: false, remaining: 0, retry: 100 * time.Millisecond, reset: 2 * time.Second},
		// Half a token is not a token; the deny charges nothing.
		{advance: 50 * time.Millisecond, cost: 1, allowed: false, remaining: 0, retry: 50 * time.Millisecond, reset: 1950 * time.Millisecond},
		{advance: 50 * time.Millisecond, cost: 1, allowed: true, remaining: 0, reset: 2 * time.Second},
		// 2.5 tokens: two are spendable, three are 50ms away.
		{advance: 250 * time.Millisecond, cost: 0, allowed: true, remaining: 2, reset: 1750 * time.Millisecond},
		{cost: 3, allowed: false, remaining: 2, retry: 50 * time.Millisecond, reset: 1750 * time.Millisecond},
		// A refund gives tokens back, keeping the half token.
		{cost: -5, allowed: true, remaining: 7, reset: 1250 * time.Millisecond},
		// More than the burst can never pass, and costs nothing.
		{cost: 21, allowed: false, remaining: 7, retry: algorithms.Never, reset: 1250 * time.Millisecond},
		{cost: 1 << 40, allowed: false, remaining: 7, retry: algorithms.Never, reset: 1250 * time.Millisecond},
		// A refund never fills above the burst.
		{cost: -100, allowed: true, remaining: 20, reset: 0},
		{cost: 20, allowed: true, remaining: 0, reset: 2 * time.Second},
		{advance: time.Hour, cost: 0, allowed: true, remaining: 20, reset: 0},
	})
}

// TestTokenBucketLimitChange decides one stored bucket under new limits,
// as happens when a config reload changes a rule: whole tokens carry over
// (capped at the new burst), fractions of a token are dropped, and the
// refill since the last decision runs at the new rate.
func TestTokenBucketLimitChange(t *testing.T) {
	tb := func(requests int64, period time.Duration, burst int64) *algorithms.Limit {
		return &algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: requests, Period: period, Burst: burst}
	}
	runSteps(t, *tb(10, time.Second, 20), algorithms.State{}, []step{
		{cost: 5, allowed: true, remaining: 15, reset: 500 * time.Millisecond},
		{advance: 250 * time.Millisecond, cost: 1, allowed: true, remaining: 16, reset: 350 * time.Millisecond}, // 16.5 tokens
		// 7/s counts in thousandths of a token, 10/s in hundredths: 16.5 becomes 16.
		{limit: tb(7, time.Second, 20), cost: 0, allowed: true, remaining: 16, reset: 572 * time.Millisecond},
		{cost: 1, allowed: true, remaining: 15, reset: 715 * time.Millisecond},
		// A smaller burst caps the carried tokens.
		{limit: tb(5, time.Second, 5), cost: 0, allowed: true, remaining: 5, reset: 0},
		{cost: 5, allowed: true, remaining: 0, reset: time.Second},
		// A larger burst starts from the tokens held, refilled at the new rate.
		{limit: tb(100, time.Second, 100), advance: 150 * time.Millisecond, cost: 0, allowed: true, remaining: 15, reset: 850 * time.Millisecond},
		{cost: 16, allowed: false, remaining: 15, retry: 10 * time.Millisecond, reset: 850 * time.Millisecond},
		// Burst 0 means Requests.
		{limit: tb(4, time.Second, 0), advance: time.Minute, cost: 0, allowed: true, remaining: 4, reset: 0},
	})
}

// TestTokenBucketClockBack moves the clock back by a second. The bucket
// stands where it was at its last decision; every wait is measured from the
// caller's now, so it includes the second the clock lost.
func TestTokenBucketClockBack(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Second, Burst: 20}
	runSteps(t, l, algorithms.State{}, []step{
		{cost: 15, allowed: true, remaining: 5, reset: 1500 * time.Millisecond},
		{advance: -time.Second, cost: 0, allowed: true, remaining: 5, reset: 2500 * time.Millisecond},
		{cost: 6, allowed: false, remaining: 5, retry: 1100 * time.Millisecond, reset: 2500 * time.Millisecond},
		{cost: 5, allowed: true, remaining: 0, reset: 3 * time.Second},
		{cost: 1, allowed: false, remaining: 0, retry: 1100 * time.Millisecond, reset: 3 * time.Second},
		// Back at t0 nothing has refilled; the retry holds to the millisecond.
		{advance: 1099 * time.Millisecond, cost: 1, allowed: false, remaining: 0, retry: time.Millisecond, reset: 1901 * time.Millisecond},
		{advance: time.Millisecond, cost: 1, allowed: true, remaining: 0, reset: 2 * time.Second},
	})
}

// TestTokenBucketClockBackTTL pins the TTL of a bucket whose last refill is
// ahead of the caller's clock: it must outlive the lag, or dropping it would
// hand out a full bucket that refills from the earlier now.
func TestTokenBucketClockBackTTL(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Second, Burst: 20}
	s, _ := algorithms.Decide(l, algorithms.State{}, epoch, 1)
	s, d := algorithms.Decide(l, s, epoch.Add(-5*time.Second), -1)
	want := algorithms.Decision{Allowed: true, Limit: 20, Remaining: 20, ResetAfter: 0, TTL: 5 * time.Second}
	if d != want {
		t.Fatalf("refund to full 5s before the last refill: got %+v, want %+v", d, want)
	}
	// Spending all 20 from the kept state refills from t0, not from t0-5s.
	_, d = algorithms.Decide(l, s, epoch.Add(-5*time.Second), 20)
	if d.ResetAfter != 7*time.Second || d.TTL != 7*time.Second {
		t.Errorf("spend 20 at t0-5s: got reset_after=%v ttl=%v, want 7s and 7s", d.ResetAfter, d.TTL)
	}
}

// TestLimitScale: the buckets' rate in lowest terms, as a store that
// decides elsewhere receives it.
func TestLimitScale(t *testing.T) {
	for _, tc := range []struct {
		requests     int64
		period       time.Duration
		perMs, scale int64
	}{
		{10, time.Second, 1, 100},
		{1000, 24 * time.Hour, 1, 86_400},
		{3, 2 * time.Millisecond, 3, 2},
		{6, 4 * time.Millisecond, 3, 2},
		{7, time.Minute, 7, 60_000},
	} {
		l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: tc.requests, Period: tc.period}
		if perMs, scale := l.Scale(); perMs != tc.perMs || scale != tc.scale {
			t.Errorf("%d per %v: Scale %d, %d; want %d, %d", tc.requests, tc.period, perMs, scale, tc.perMs, tc.scale)
		}
	}
}
