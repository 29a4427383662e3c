package rlqs

import (
	"context"
	"errors"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/memstore"
)

const testQuota = `domain: d
quota_buckets:
  - bucket_id: {k: "*"}
    rate_limit: {unit: minute, requests_per_unit: 100}
  - bucket_id: {k: closed}
    rate_limit: {unit: minute, requests_per_unit: 100, failure_mode: closed}
`

func usage(domain, k string, n uint64) *rlqsv3.RateLimitQuotaUsageReports {
	return &rlqsv3.RateLimitQuotaUsageReports{Domain: domain, BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{{
		BucketId: &rlqsv3.BucketId{Bucket: map[string]string{"k": k}}, NumRequestsAllowed: n, TimeElapsed: durationpb.New(time.Second),
	}}}
}

// only returns the single action of r.
func only(t *testing.T, r *rlqsv3.RateLimitQuotaResponse) *rlqsv3.RateLimitQuotaResponse_BucketAction {
	t.Helper()
	if len(r.GetBucketAction()) != 1 {
		t.Fatalf("%d actions in %v, want 1", len(r.GetBucketAction()), r)
	}
	return r.GetBucketAction()[0]
}

func perMinute(t *testing.T, a *rlqsv3.RateLimitQuotaResponse_BucketAction) uint64 {
	t.Helper()
	r := a.GetQuotaAssignmentAction().GetRateLimitStrategy().GetRequestsPerTimeUnit()
	if r == nil {
		t.Fatalf("action %v, want requests_per_time_unit", a)
	}
	return r.GetRequestsPerTimeUnit()
}

func newTestService(t testing.TB, yaml string, d store.DemandStore) (*Service, *testkit.Rules) {
	cfg := testkit.StaticRules(testkit.ParseRules(t, yaml))
	return New(Settings{Rules: cfg, Demand: d}), cfg
}

// TestLocalPush: when a second instance reports a budget on the same
// replica, the first is pushed its smaller share without reporting, and
// its larger share again when the second leaves.
func TestLocalPush(t *testing.T) {
	svc, _ := newTestService(t, testQuota, memstore.NewDemand())
	a, b := openFake(t, svc), openFake(t, svc)
	a.in <- usage("d", "x", 10)
	if got := perMinute(t, only(t, a.next(t))); got != 100 {
		t.Fatalf("alone: %d, want 100", got)
	}
	b.in <- usage("d", "x", 10)
	if got := perMinute(t, only(t, b.next(t))); got != 50 {
		t.Fatalf("B: %d, want 50", got)
	}
	if got := perMinute(t, only(t, a.next(t))); got != 50 {
		t.Fatalf("A pushed: %d, want 50", got)
	}
	b.cancel()
	<-b.end
	if got := perMinute(t, only(t, a.next(t))); got != 100 {
		t.Fatalf("A after B left: %d, want 100", got)
	}
}

// TestDrain: Drain sends every bucket's assignment once more and ends the
// streams with OK; later streams are refused with Unavailable.
func TestDrain(t *testing.T) {
	svc, _ := newTestService(t, testQuota, memstore.NewDemand())
	a := openFake(t, svc)
	a.in <- usage("d", "x", 10)
	a.next(t)
	done := make(chan struct{})
	go func() {
		svc.Drain(context.Background())
		close(done)
	}()
	if got := perMinute(t, only(t, a.next(t))); got != 100 {
		t.Errorf("final assignment %d, want 100", got)
	}
	<-done
	<-a.end
	if a.err != nil {
		t.Errorf("drained stream ended with %v, want OK", a.err)
	}
	late := openFake(t, svc)
	<-late.end
	if status.Code(late.err) != codes.Unavailable {
		t.Errorf("stream after Drain: %v, want Unavailable", late.err)
	}
}

// TestUnmatchedAbandon: with quota_unmatched: abandon an unmatched bucket
// is abandoned and not kept; a removed entry's bucket is abandoned on
// ConfigChanged.
func TestUnmatchedAbandon(t *testing.T) {
	svc, cfg := newTestService(t, "domain: d\nquota_unmatched: abandon\nquota_buckets:\n  - bucket_id: {k: x}\n    blanket_rule: deny_all\n", memstore.NewDemand())
	a := openFake(t, svc)
	a.in <- usage("d", "y", 1)
	if act := only(t, a.next(t)); act.GetAbandonAction() == nil {
		t.Fatalf("unmatched: %v, want an abandon", act)
	}
	a.in <- usage("", "x", 1)
	if act := only(t, a.next(t)); act.GetQuotaAssignmentAction().GetRateLimitStrategy().GetBlanketRule() != typev3.RateLimitStrategy_DENY_ALL {
		t.Fatalf("x: %v, want DENY_ALL", act)
	}
	cfg.Set(testkit.ParseRules(t, "domain: d\n"))
	svc.ConfigChanged()
	if act := only(t, a.next(t)); act.GetAbandonAction() == nil || act.GetBucketId().GetBucket()["k"] != "x" {
		t.Fatalf("after the entry went: %v, want x abandoned", act)
	}
}

// failingDemand is a demand store that cannot be reached.
type failingDemand struct{}

func (failingDemand) ReportDemand(context.Context, time.Time, []store.DemandReport, []store.DemandTotal) error {
	return store.ErrUnavailable
}
func (failingDemand) ForgetDemand(context.Context, string, string) error {
	return errors.New("down")
}

// TestDemandStoreDown: without totals from the store, a failure_mode:
// closed entry assigns DENY_ALL, an open one this replica's own view.
func TestDemandStoreDown(t *testing.T) {
	svc, _ := newTestService(t, testQuota, failingDemand{})
	a := openFake(t, svc)
	a.in <- usage("d", "closed", 10)
	if act := only(t, a.next(t)); act.GetQuotaAssignmentAction().GetRateLimitStrategy().GetBlanketRule() != typev3.RateLimitStrategy_DENY_ALL ||
		act.GetQuotaAssignmentAction().GetRateLimitStrategy().GetStrategy() == nil {
		t.Errorf("closed: %v, want DENY_ALL", act)
	}
	a.in <- usage("", "open", 10)
	if got := perMinute(t, only(t, a.next(t))); got != 100 {
		t.Errorf("open: %d, want 100 (the local view)", got)
	}
}
