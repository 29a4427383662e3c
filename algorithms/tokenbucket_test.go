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
// as happens when a config reload changes a rule: the time until the
// bucket is full carries over (to the ms), read at the new rate and
// capacity, and the refill runs at the new rate.
func TestTokenBucketLimitChange(t *testing.T) {
	tb := func(requests int64, period time.Duration, burst int64) *algorithms.Limit {
		return &algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: requests, Period: period, Burst: burst}
	}
	runSteps(t, *tb(10, time.Second, 20), algorithms.State{}, []step{
		{cost: 5, allowed: true, remaining: 15, reset: 500 * time.Millisecond},
		{advance: 250 * time.Millisecond, cost: 1, allowed: true, remaining: 16, reset: 350 * time.Millisecond}, // 16.5 tokens
		// 350 ms from full at 7/s is 2.45 tokens short of 20.
		{limit: tb(7, time.Second, 20), cost: 0, allowed: true, remaining: 17, reset: 350 * time.Millisecond},
		{cost: 1, allowed: true, remaining: 16, reset: 493 * time.Millisecond}, // 492 6/7 ms, rounded up
		// A smaller burst: 493 ms from full at 5/s is 2.465 tokens short of 5.
		{limit: tb(5, time.Second, 5), cost: 0, allowed: true, remaining: 2, reset: 493 * time.Millisecond},
		{cost: 5, allowed: false, remaining: 2, retry: 493 * time.Millisecond, reset: 493 * time.Millisecond},
		// A larger burst: 343 ms from full at 100/s is 34.3 tokens short of 100.
		{limit: tb(100, time.Second, 100), advance: 150 * time.Millisecond, cost: 0, allowed: true, remaining: 65, reset: 343 * time.Millisecond},
		{cost: 16, allowed: true, remaining: 49, reset: 503 * time.Millisecond},
		// Burst 0 means Requests.
		{limit: tb(4, time.Second, 0), advance: time.Minute, cost: 0, allowed: true, remaining: 4, reset: 0},
	})
}

// TestTokenBucketClockBack moves the clock back by a second. The bucket
// stands as far from full as its arrival time is ahead of the caller's
// now: a second emptier, so it refills no sooner than it would have, and
// every wait is exact from that now.
func TestTokenBucketClockBack(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Second, Burst: 20}
	runSteps(t, l, algorithms.State{}, []step{
		{cost: 15, allowed: true, remaining: 5, reset: 1500 * time.Millisecond},
		{advance: -time.Second, cost: 0, allowed: true, remaining: 0, reset: 2500 * time.Millisecond},
		{cost: 6, allowed: false, remaining: 0, retry: 1100 * time.Millisecond, reset: 2500 * time.Millisecond},
		{cost: 1, allowed: false, remaining: 0, retry: 600 * time.Millisecond, reset: 2500 * time.Millisecond},
		// The retry holds to the millisecond.
		{advance: 599 * time.Millisecond, cost: 1, allowed: false, remaining: 0, retry: time.Millisecond, reset: 1901 * time.Millisecond},
		{advance: time.Millisecond, cost: 1, allowed: true, remaining: 0, reset: 2 * time.Second},
		// Back at t0 and past it, the bucket refills from the time it stood at.
		{advance: time.Second, cost: 0, allowed: true, remaining: 10, reset: time.Second},
	})
}

// TestTokenBucketClockBackTTL pins the TTL of a bucket whose arrival time
// is ahead of the caller's clock by more than a debt's depth: it must
// outlive that lead, or dropping it would hand out a full bucket early.
func TestTokenBucketClockBackTTL(t *testing.T) {
	l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Second, Burst: 20}
	s, _ := algorithms.Decide(l, algorithms.State{}, epoch, 1)
	s, d := algorithms.Decide(l, s, epoch.Add(-5*time.Second), -1)
	want := algorithms.Decision{Allowed: true, Limit: 20, Remaining: 0, ResetAfter: 5 * time.Second, TTL: 5 * time.Second}
	if d != want {
		t.Fatalf("refund 5s before the last charge: got %+v, want %+v", d, want)
	}
	// All 20 fit once the bucket is full again, 5s on.
	_, d = algorithms.Decide(l, s, epoch.Add(-5*time.Second), 20)
	if d.Allowed || d.RetryAfter != 5*time.Second || d.TTL != 5*time.Second {
		t.Errorf("spend 20 at t0-5s: got %+v, want a deny with retry 5s and TTL 5s", d)
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
