package server_test

import (
	"context"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/store/memstore"
	"github.com/floodgate/floodgate/store/splitstore"
)

// perStoreRules: per-second limits (on the per-second store of a split)
// open and closed, and a closed per-minute limit on the main store.
const perStoreRules = `domain: edge
descriptors:
  - key: sec_closed
    rate_limit: {unit: second, requests_per_unit: 100, failure_mode: closed}
  - key: sec_open
    rate_limit: {unit: second, requests_per_unit: 100, failure_mode: open}
  - key: min
    rate_limit: {unit: minute, requests_per_unit: 2, failure_mode: closed}
`

// TestEnvoyPerStoreFailure: with the per-second store down, a request
// whose limits all live on the healthy main store is decided there; a
// request with a per-second limit too takes that limit's failure mode for
// it alone: closed denies and charges the main store nothing, open admits
// and the main store counts.
func TestEnvoyPerStoreFailure(t *testing.T) {
	main := memstore.New(memstore.Config{})
	h := startEnvoy(t, perStoreRules, splitstore.New(main, failingStore{memstore.New(memstore.Config{})}), server.EnvoySettings{})
	ask := func(descs ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
		t.Helper()
		resp, err := h.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: descs})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	minD, closedD, openD := testkit.Descriptor("min", "a"), testkit.Descriptor("sec_closed", "a"), testkit.Descriptor("sec_open", "a")
	// Closed per-second limit down: denied, degraded, the main limit not charged.
	for range 3 {
		r := ask(closedD, minD)
		if got := codesOf(r); got != "OVER_LIMIT:OVER_LIMIT,OK" {
			t.Fatalf("closed per-second limit down: %s", got)
		}
		if r.Statuses[0].CurrentLimit != nil || r.Statuses[1].CurrentLimit == nil || r.Statuses[1].LimitRemaining != 1 {
			t.Fatalf("statuses: %v", r.Statuses)
		}
	}
	// Open per-second limit down: admitted; the main limit counts.
	if got := codesOf(ask(openD, minD)); got != "OK:OK,OK" {
		t.Fatalf("open per-second limit down: %s", got)
	}
	// The main limit alone: decided on the main store, which has 1 left.
	if r := ask(minD); codesOf(r) != "OK:OK" || r.Statuses[0].CurrentLimit == nil || r.Statuses[0].LimitRemaining != 0 {
		t.Fatalf("main limit alone, second call: %s %v", codesOf(r), r.Statuses)
	}
	for _, descs := range [][]*ratelimitv3.RateLimitDescriptor{{minD}, {openD, minD}} {
		if r := ask(descs...); r.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT || r.Statuses[len(descs)-1].CurrentLimit == nil {
			t.Fatalf("main limit spent: %s %v", codesOf(r), r.Statuses)
		}
	}
}

// TestCheckPerStoreFailure: the Check API judges failure per store too: a
// CheckBatch with a per-second check failing closed is denied without
// charging its per-minute check on the healthy store; failing open, it is
// admitted and counted there; a per-minute check alone is decided there.
func TestCheckPerStoreFailure(t *testing.T) {
	inline := func(key string, period time.Duration) *floodgatev1.CheckRequest {
		return &floodgatev1.CheckRequest{Key: key, Algorithm: floodgatev1.Algorithm_ALGORITHM_FIXED_WINDOW, Cost: 1,
			Source: &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: 2, Period: durationpb.New(period)}}}
	}
	for _, mode := range []rules.FailureMode{rules.FailureClosed, rules.FailureOpen} {
		c := start(t, splitstore.New(memstore.New(memstore.Config{}), failingStore{memstore.New(memstore.Config{})}), server.Settings{FailureMode: mode})
		batch := func() *floodgatev1.CheckBatchResponse {
			t.Helper()
			resp, err := c.client.CheckBatch(context.Background(), &floodgatev1.CheckBatchRequest{Checks: []*floodgatev1.CheckRequest{inline("s", time.Second), inline("m", time.Minute)}})
			if err != nil {
				t.Fatal(err)
			}
			return resp
		}
		for range 3 {
			r := batch()
			if r.Allowed != (mode == rules.FailureOpen) || r.Results[1].Remaining != 1 || !r.Results[0].Degraded {
				t.Fatalf("%v per-second check down: %v", mode, r)
			}
			if mode == rules.FailureOpen {
				break
			}
		}
		// Closed charged nothing (2 left), open charged 1 (1 left).
		wants := []bool{true, true, false}
		if mode == rules.FailureOpen {
			wants = wants[1:]
		}
		for _, want := range wants {
			resp, err := c.client.Check(context.Background(), inline("m", time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			if resp.Allowed != want || resp.Degraded {
				t.Fatalf("%v: per-minute check alone: %v, want allowed %v", mode, resp, want)
			}
		}
	}
}
