package rlqs

import (
	"fmt"
	"math"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/store/memstore"
)

// simEnvoy is one Envoy instance as the fairness simulation models it:
// Envoy's local limiter for an assignment is a token bucket holding at
// most the assigned requests, refilled continuously at requests per time
// unit, and full when a new (different) strategy is applied; re-sending
// the same strategy only extends it. Requests arrive at demand per second.
type simEnvoy struct {
	c        *fakeClient
	demand   float64 // requests per second
	offset   time.Duration
	joined   bool
	left     bool
	active   *typev3.RateLimitStrategy
	tokens   float64
	max      float64
	rate     float64 // tokens per second
	arrivals float64
	allowed  uint64
	denied   uint64
}

const simBucket = "x"

func (e *simEnvoy) report(t *testing.T, first bool) {
	msg := &rlqsv3.RateLimitQuotaUsageReports{BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{{
		BucketId:           &rlqsv3.BucketId{Bucket: map[string]string{"b": simBucket}},
		NumRequestsAllowed: e.allowed, NumRequestsDenied: e.denied,
		TimeElapsed: durationpb.New(time.Second),
	}}}
	if first {
		msg.Domain = "d"
		msg.BucketQuotaUsages[0].TimeElapsed = durationpb.New(0)
	}
	e.allowed, e.denied = 0, 0
	e.c.in <- msg
	for _, a := range e.c.next(t).GetBucketAction() {
		s := a.GetQuotaAssignmentAction().GetRateLimitStrategy()
		if proto.Equal(s, e.active) {
			continue // extended, unchanged
		}
		e.active = s
		switch {
		case s.GetRequestsPerTimeUnit() != nil:
			r := s.GetRequestsPerTimeUnit()
			if r.GetTimeUnit() != typev3.RateLimitUnit_MINUTE {
				t.Fatalf("strategy %v, want requests per minute", s)
			}
			e.max = float64(r.GetRequestsPerTimeUnit())
			e.rate = e.max / 60
		case s.GetTokenBucket() != nil:
			tb := s.GetTokenBucket()
			e.max = float64(tb.GetMaxTokens())
			e.rate = float64(tb.GetTokensPerFill().GetValue()) / tb.GetFillInterval().AsDuration().Seconds()
		default:
			t.Fatalf("strategy %v", s)
		}
		e.tokens = e.max
	}
}

// step advances the instance by dt and returns the requests it admitted.
func (e *simEnvoy) step(dt time.Duration) int {
	if !e.joined || e.left {
		return 0
	}
	e.tokens = min(e.max, e.tokens+e.rate*dt.Seconds())
	e.arrivals += e.demand * dt.Seconds()
	admitted := 0
	for ; e.arrivals >= 1; e.arrivals-- {
		if e.tokens >= 1 {
			e.tokens--
			e.allowed++
			admitted++
		} else {
			e.denied++
		}
	}
	return admitted
}

// simEvent changes an instance at a time: join, leave, or a new demand.
type simEvent struct {
	at       time.Duration
	instance int
	join     bool
	leave    bool
	demand   float64
}

// simulate runs instances (one per floodgate replica, sharing one demand
// store, so shares change only at each instance's own report: the worst
// case) against a budget of 600 requests a minute, reporting every
// second, and returns the most requests all instances admitted in any
// one-minute window starting at or after from (in 10 ms steps), over 600.
func simulate(t *testing.T, rateLimit string, events []simEvent, n int, run, from time.Duration) float64 {
	t.Helper()
	cfg := testkit.StaticRules(testkit.ParseRules(t, "domain: d\nquota_buckets:\n  - bucket_id: {b: \"*\"}\n    rate_limit: "+rateLimit+"\n"))
	clock := testkit.NewClock(time.Unix(1_700_000_000, 0))
	start := clock.Now()
	demand := memstore.NewDemand()
	es := make([]*simEnvoy, n)
	for i := range es {
		svc := New(Settings{Rules: cfg, Demand: demand, Now: clock.Now})
		es[i] = &simEnvoy{c: openFake(t, svc), offset: time.Duration(i*130) * time.Millisecond}
	}
	const dt = 10 * time.Millisecond
	steps := int(run / dt)
	window := int(time.Minute / dt)
	admitted := make([]int, steps)
	for s := 0; s < steps; s++ {
		now := time.Duration(s) * dt
		clock.Set(start.Add(now))
		for _, ev := range events {
			if ev.at != now {
				continue
			}
			e := es[ev.instance]
			switch {
			case ev.join:
				e.joined, e.demand = true, ev.demand
				e.allowed = 1
				e.report(t, true)
			case ev.leave:
				e.left = true
				e.c.cancel()
				<-e.c.end
			default:
				e.demand = ev.demand
			}
		}
		for _, e := range es {
			if e.joined && !e.left && now > 0 && (now-e.offset)%time.Second == 0 {
				e.report(t, false)
			}
			admitted[s] += e.step(dt)
		}
	}
	most, sum := 0, 0
	for s := 0; s < steps; s++ {
		sum += admitted[s]
		if s >= window {
			sum -= admitted[s-window]
		}
		if s+1 >= window && time.Duration(s+1-window)*dt >= from {
			most = max(most, sum)
		}
	}
	return float64(most) / 600
}

// TestFairnessBound measures what all instances together admit in any
// window of the limit's period against the budget, in simulated time:
// at most 1.1 × the budget under steady demand (the fairness target),
// and the transients after start, a join, a leave and a demand shift,
// which the docs state (docs/rlqs.md). Run with -v for the figures.
func TestFairnessBound(t *testing.T) {
	steady := []simEvent{{at: 0, instance: 0, join: true, demand: 20}, {at: 0, instance: 1, join: true, demand: 10}, {at: 0, instance: 2, join: true, demand: 5}}
	// Per strategy: requests_per_time_unit (a fixed_window entry) lets
	// Envoy start each new assignment with a full minute's share; a
	// token_bucket entry with a burst of a tenth of the rate bounds that.
	const (
		perMinute = "{unit: minute, requests_per_unit: 600}"
		smooth    = "{unit: minute, requests_per_unit: 600, algorithm: token_bucket, burst: 60}"
	)
	join := append(steady[:2:2], simEvent{at: 5 * time.Minute, instance: 2, join: true, demand: 5})
	leave := append(steady[:3:3], simEvent{at: 5 * time.Minute, instance: 0, leave: true})
	shift := append(steady[:2:2], simEvent{at: 5 * time.Minute, instance: 0, demand: 10}, simEvent{at: 5 * time.Minute, instance: 1, demand: 20})
	for _, tc := range []struct {
		name      string
		rateLimit string
		events    []simEvent
		from      time.Duration // windows measured from here
		bound     float64
	}{
		{"steady, 3 instances, demand 20/10/5 rps", perMinute, steady, 2 * time.Minute, 1.1},
		{"start (every limiter starts full)", perMinute, steady, 0, 2.1},
		{"join of a 3rd instance at 5m", perMinute, join, 4 * time.Minute, 2.1},
		{"leave of the 1st instance at 5m", perMinute, leave, 4 * time.Minute, 1.6},
		{"demand shift 20/10 to 10/20 at 5m", perMinute, shift, 4 * time.Minute, 2.1},
		{"token bucket: steady", smooth, steady, 2 * time.Minute, 1.1},
		{"token bucket: start", smooth, steady, 0, 1.3},
		{"token bucket: join", smooth, join, 4 * time.Minute, 1.3},
		{"token bucket: leave", smooth, leave, 4 * time.Minute, 1.3},
		{"token bucket: shift", smooth, shift, 4 * time.Minute, 1.3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := simulate(t, tc.rateLimit, tc.events, 3, 9*time.Minute, tc.from)
			t.Logf("most admitted in a 1m window from %v: %.3f × the budget", tc.from, got)
			if got > tc.bound || math.IsNaN(got) {
				t.Errorf("%.3f × the budget, want at most %.2f", got, tc.bound)
			}
			if got < 0.9 {
				t.Errorf("%.3f × the budget: the budget is not used (want at least 0.9 with demand far above it)", got)
			}
		})
	}
}

func ExampleShareParams_Share() {
	p := ShareParams{Floor: DefaultFloor, Cap: DefaultCap}
	// 100 a minute; two instances at 10 and 30 requests a second.
	fmt.Println(p.Share(100, time.Minute, totals(2, 40_000), 10_000), p.Share(100, time.Minute, totals(2, 40_000), 30_000))
	// Output: 27 72
}
