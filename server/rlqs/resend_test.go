package rlqs

import (
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/floodgate/floodgate/store/memstore"
)

// TestShareMoveResend: an instance alone on a budget of 6,000 a minute
// gets twice its demand over the period (the cap). When its demand grows
// by a percent or two its share does too, which is not worth resetting
// Envoy's limiter: the last strategy is re-sent. When the share moves by
// 6%, up or down, the new one is sent.
func TestShareMoveResend(t *testing.T) {
	yaml := "domain: d\nquota_buckets:\n  - bucket_id: {k: \"*\"}\n    rate_limit: {unit: minute, requests_per_unit: 6000}\n"
	svc, _ := newTestService(t, yaml, memstore.NewDemand())
	c := openFake(t, svc)
	report := func(allowed uint64) uint64 { // over 10 seconds
		t.Helper()
		c.in <- &rlqsv3.RateLimitQuotaUsageReports{Domain: "d", BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{{
			BucketId: &rlqsv3.BucketId{Bucket: map[string]string{"k": "x"}}, NumRequestsAllowed: allowed, TimeElapsed: durationpb.New(10 * time.Second),
		}}}
		return perMinute(t, only(t, c.next(t)))
	}
	for i, step := range []struct {
		allowed uint64 // in 10s
		want    uint64
	}{
		{200, 2400}, // 20/s: 2 × 20 × 60
		{204, 2400}, // 20.4/s: 2448 is 2% more, the last strategy re-sent
		{212, 2544}, // 21.2/s: 6% more, sent
		{199, 2388}, // 19.9/s: 6% less, sent
		{201, 2388}, // 20.1/s: 2412 is 1% more, re-sent
	} {
		if got := report(step.allowed); got != step.want {
			t.Fatalf("report %d (%d in 10s): %d a minute, want %d", i, step.allowed, got, step.want)
		}
	}
}
