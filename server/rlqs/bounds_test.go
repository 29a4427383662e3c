package rlqs

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/memstore"
)

// report is one usage report of bucket b.
func report(domain string, b map[string]string, allowed uint64, elapsed time.Duration) *rlqsv3.RateLimitQuotaUsageReports {
	return &rlqsv3.RateLimitQuotaUsageReports{Domain: domain, BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{{
		BucketId: &rlqsv3.BucketId{Bucket: b}, NumRequestsAllowed: allowed, TimeElapsed: durationpb.New(elapsed),
	}}}
}

// gauge is g's value.
func gauge(g prometheus.Gauge) float64 {
	var m dto.Metric
	_ = g.Write(&m)
	return m.GetGauge().GetValue()
}

// ended waits for c's handler to end and returns its error.
func ended(t *testing.T, c *fakeClient) error {
	t.Helper()
	select {
	case <-c.end:
		return c.err
	case <-time.After(10 * time.Second):
		t.Fatal("stream still open after 10s")
	}
	return nil
}

// TestBucketIDBytesBounded: a bucket id's keys and values together are
// bounded (each one alone is bounded by MaxKeyBytes); the bound itself is
// accepted.
func TestBucketIDBytesBounded(t *testing.T) {
	svc, _ := newTestService(t, testQuota, memstore.NewDemand())
	a := openFake(t, svc)
	atBound := map[string]string{"k": "x", "a": strings.Repeat("v", 4095), "b": strings.Repeat("v", MaxBucketIDBytes-4095-4)}
	a.in <- report("d", atBound, 1, time.Second)
	a.next(t)
	over := map[string]string{"k": "x", "a": strings.Repeat("v", 4095), "b": strings.Repeat("v", MaxBucketIDBytes-4095-3)}
	a.in <- report("", over, 1, time.Second)
	err := ended(t, a)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "bucket_quota_usages[0].bucket_id: 8193 bytes of keys and values, more than 8192") {
		t.Errorf("over the bound: %v", err)
	}
}

// TestStreamBytesBounded: the bucket ids one stream holds are bounded in
// bytes (ResourceExhausted, naming the bound), counted on the
// floodgate_quota_bucket_id_bytes gauge, and released when buckets are
// abandoned and when the stream ends.
func TestStreamBytesBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	cfg := testkit.StaticRules(testkit.ParseRules(t, "domain: d\nquota_unmatched: abandon\nquota_buckets:\n  - bucket_id: {k: \"*\"}\n    rate_limit: {unit: minute, requests_per_unit: 100}\n"))
	svc := New(Settings{Rules: cfg, Demand: memstore.NewDemand(), MaxStreamBytes: 10_000, Metrics: m})
	a := openFake(t, svc)
	id := func(i int) map[string]string {
		return map[string]string{"k": strings.Repeat("x", 1000) + string(rune('a'+i))}
	}
	cost := heldBytes(id(0), canonical(id(0)))
	fits := int(10_000 / cost)
	for i := range fits {
		a.in <- report("d", id(i), 1, time.Second)
		a.next(t)
	}
	if got := svc.held.Load(); got != int64(fits)*cost || gauge(m.idBytes) != float64(got) {
		t.Fatalf("held %d bytes (gauge %v), want %d", got, gauge(m.idBytes), int64(fits)*cost)
	}
	// An unmatched bucket is abandoned at once: what it held is released.
	a.in <- report("", map[string]string{"other": "y"}, 1, time.Second)
	if act := only(t, a.next(t)); act.GetAbandonAction() == nil {
		t.Fatalf("unmatched: %v, want an abandon", act)
	}
	if got := svc.held.Load(); got != int64(fits)*cost {
		t.Errorf("after an abandon: held %d, want %d", got, int64(fits)*cost)
	}
	// A bucket id already held costs nothing more.
	a.in <- report("", id(0), 1, time.Second)
	a.next(t)
	a.in <- report("", id(fits), 1, time.Second)
	err := ended(t, a)
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "more than 10000") {
		t.Errorf("past the stream's bound: %v", err)
	}
	if got := svc.held.Load(); got != 0 || gauge(m.idBytes) != 0 {
		t.Errorf("after the stream ended: held %d (gauge %v), want 0", got, gauge(m.idBytes))
	}
}

// TestTotalBytesBounded: the bucket ids of all streams together are
// bounded; a stream refused for it may subscribe once another ended.
func TestTotalBytesBounded(t *testing.T) {
	cfg := testkit.StaticRules(testkit.ParseRules(t, testQuota))
	b := map[string]string{"k": strings.Repeat("x", 4000)}
	cost := heldBytes(b, canonical(b))
	svc := New(Settings{Rules: cfg, Demand: memstore.NewDemand(), MaxTotalBytes: cost + cost/2})
	a := openFake(t, svc)
	a.in <- report("d", b, 1, time.Second)
	a.next(t)
	c := openFake(t, svc)
	c.in <- report("d", map[string]string{"k": strings.Repeat("y", 4000)}, 1, time.Second)
	err := ended(t, c)
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "the server holds") {
		t.Fatalf("past the total: %v", err)
	}
	if got := svc.held.Load(); got != cost {
		t.Errorf("held %d after the refusal, want %d", got, cost)
	}
	a.cancel()
	ended(t, a)
	d := openFake(t, svc)
	d.in <- report("d", map[string]string{"k": strings.Repeat("y", 4000)}, 1, time.Second)
	d.next(t)
}

// recordingDemand is a demand store that records the reports it gets.
type recordingDemand struct {
	store.DemandStore
	mu   sync.Mutex
	reps []store.DemandReport
}

func (r *recordingDemand) ReportDemand(ctx context.Context, now time.Time, reps []store.DemandReport, out []store.DemandTotal) error {
	r.mu.Lock()
	r.reps = append(r.reps, reps...)
	r.mu.Unlock()
	return r.DemandStore.ReportDemand(ctx, now, reps, out)
}

func (r *recordingDemand) last() store.DemandReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reps[len(r.reps)-1]
}

// TestFakeReportCannotStarve: a report claiming a huge rate (a request in
// a nanosecond, or a billion in a second) counts for at most the budget's
// rate and over at least the time since the bucket's last report, so an
// honest instance keeps half the budget instead of dropping to the floor.
func TestFakeReportCannotStarve(t *testing.T) {
	for _, fake := range []struct {
		name    string
		allowed uint64
		elapsed time.Duration
	}{
		{"1 request in 1ns", 1, time.Nanosecond},
		{"a billion in 1s", 1e9, time.Second},
		{"a thousand in 1ms", 1000, time.Millisecond},
	} {
		t.Run(fake.name, func(t *testing.T) {
			clock := testkit.NewClock(time.Unix(1_700_000_000, 0))
			cfg := testkit.StaticRules(testkit.ParseRules(t, "domain: d\nquota_buckets:\n  - bucket_id: {k: \"*\"}\n    rate_limit: {unit: minute, requests_per_unit: 600}\n"))
			rec := &recordingDemand{DemandStore: memstore.NewDemand()}
			svc := New(Settings{Rules: cfg, Demand: rec, Now: clock.Now})
			honest, attacker := openFake(t, svc), openFake(t, svc)
			b := map[string]string{"k": "x"}
			honest.in <- report("d", b, 100, time.Second) // 100 rps
			honest.next(t)
			for range 5 {
				attacker.in <- report("d", b, fake.allowed, fake.elapsed)
				attacker.next(t)
				if got := rec.last().MilliRPS; got > 10_000 {
					t.Fatalf("the fake report counts %d milli-rps, more than the budget's 10,000", got)
				}
			}
			clock.Advance(time.Second)
			honest.in <- report("", b, 100, time.Second)
			if got := perMinute(t, only(t, honest.next(t))); got < 300 {
				t.Errorf("the honest instance's share %d/min, want at least half of 600", got)
			}
		})
	}
}

// TestDemandAgesOut: a report's demand counts in the store for two of the
// intervals it really covered (at least the assignment TTL), not for two
// of what its time_elapsed claims: a day claimed on a fresh stream is not
// kept two days after a crash. Honest reports keep their two intervals.
func TestDemandAgesOut(t *testing.T) {
	clock := testkit.NewClock(time.Unix(1_700_000_000, 0))
	cfg := testkit.StaticRules(testkit.ParseRules(t, testQuota))
	rec := &recordingDemand{DemandStore: memstore.NewDemand()}
	svc := New(Settings{Rules: cfg, Demand: rec, Now: clock.Now})
	a := openFake(t, svc)
	b := map[string]string{"k": "x"}
	a.in <- report("d", b, 10, 24*time.Hour)
	a.next(t)
	if got := rec.last().TTL; got != 2*firstCover {
		t.Errorf("a day claimed on a fresh stream: demand TTL %v, want %v", got, 2*firstCover)
	}
	clock.Advance(30 * time.Second)
	a.in <- report("", b, 10, 24*time.Hour)
	a.next(t)
	if got := rec.last().TTL; got != time.Minute {
		t.Errorf("a day claimed 30s after the last report: demand TTL %v, want 1m", got)
	}
	clock.Advance(30 * time.Second)
	a.in <- report("", b, 10, 20*time.Second)
	if act := only(t, a.next(t)); act.GetQuotaAssignmentAction().GetAssignmentTimeToLive().AsDuration() != 41*time.Second {
		t.Errorf("assignment TTL %v, want 41s (twice the reporting interval, plus a second)", act.GetQuotaAssignmentAction().GetAssignmentTimeToLive().AsDuration())
	}
	if got := rec.last(); got.TTL != 40*time.Second || got.MilliRPS != 333 {
		t.Errorf("honest 20s report: TTL %v, demand %d; want 40s, 333 (10 requests over the 30s since the last)", got.TTL, got.MilliRPS)
	}
	// A bucket first reported on an old stream is bounded by the stream's age.
	clock.Advance(5 * time.Minute)
	a.in <- report("", map[string]string{"k": "y"}, 1, 24*time.Hour)
	a.next(t)
	if got := rec.last().TTL; got != 2*(5*time.Minute+time.Minute) {
		t.Errorf("new bucket on a 6m old stream: TTL %v, want 12m", got)
	}
	// Reports a day apart cover at most maxCover.
	clock.Advance(24 * time.Hour)
	a.in <- report("", b, 1, 24*time.Hour)
	a.next(t)
	if got := rec.last().TTL; got != 2*maxCover {
		t.Errorf("reports a day apart: TTL %v, want %v", got, 2*maxCover)
	}
	// A short report on a fresh stream counts for the assignment TTL.
	c := openFake(t, svc)
	c.in <- report("d", b, 1, time.Second)
	c.next(t)
	if got := rec.last().TTL; got != DefaultAssignmentTTL {
		t.Errorf("a 1s report: TTL %v, want %v", got, DefaultAssignmentTTL)
	}
}

// TestHeldBytes: a held bucket costs bucketOverhead, its id's canonical
// string, its keys and values again (the copy), and keyOverhead a key.
func TestHeldBytes(t *testing.T) {
	tests := []struct {
		b    map[string]string
		want int64
	}{
		{map[string]string{"k": "abc"}, bucketOverhead + int64(len("1:k3:abc")) + 4 + keyOverhead},
		{map[string]string{"a": "", "bb": "c"}, bucketOverhead + int64(len("1:a0:2:bb1:c")) + 4 + 2*keyOverhead},
	}
	for _, tt := range tests {
		if got := heldBytes(tt.b, canonical(tt.b)); got != tt.want {
			t.Errorf("heldBytes(%v) = %d, want %d", tt.b, got, tt.want)
		}
	}
}

// TestNewDefaults: zero Settings take the documented bounds.
func TestNewDefaults(t *testing.T) {
	s := New(Settings{})
	if s.keyBytes != DefaultMaxKeyBytes || s.maxStream != DefaultMaxStreamBytes || s.maxTotal != DefaultMaxTotalBytes {
		t.Errorf("bounds %d, %d, %d", s.keyBytes, s.maxStream, s.maxTotal)
	}
}

// TestReportCoversAtLeastMinElapsed: with a budget too large to bound it,
// a report's demand is its requests over at least 100ms.
func TestReportCoversAtLeastMinElapsed(t *testing.T) {
	cfg := testkit.StaticRules(testkit.ParseRules(t, "domain: d\nquota_buckets:\n  - bucket_id: {k: \"*\"}\n    rate_limit: {unit: second, requests_per_unit: 1000000}\n"))
	rec := &recordingDemand{DemandStore: memstore.NewDemand()}
	a := openFake(t, New(Settings{Rules: cfg, Demand: rec}))
	a.in <- report("d", map[string]string{"k": "x"}, 1, time.Nanosecond)
	a.next(t)
	if got := rec.last().MilliRPS; got != 10_000 {
		t.Errorf("1 request in 1ns counts %d milli-rps, want 10,000 (1 in 100ms)", got)
	}
}

// TestChanged: a shrinking share is always sent, a growing one from 5%.
func TestChanged(t *testing.T) {
	base := assigned{action: rules.QuotaRateLimit, share: 100}
	with := func(share int64) assigned { a := base; a.share = share; return a }
	tests := []struct {
		name string
		b    assigned
		want bool
	}{
		{"same", with(100), false},
		{"one less", with(99), true},
		{"much less", with(10), true},
		{"4% more", with(104), false},
		{"5% more", with(105), true},
		{"another action", assigned{action: rules.QuotaAllowAll, share: 100}, true},
		{"closed", assigned{action: rules.QuotaRateLimit, share: 100, closed: true}, true},
	}
	for _, tt := range tests {
		if got := changed(base, tt.b); got != tt.want {
			t.Errorf("%s: changed = %v, want %v", tt.name, got, tt.want)
		}
	}
	if !changed(assigned{action: rules.QuotaRateLimit}, assigned{action: rules.QuotaRateLimit, share: 1}) {
		t.Error("0 to 1: not changed")
	}
}

// TestBytesBoundsAreInclusive: a stream may hold exactly its bound in
// bucket ids, and all streams together exactly theirs; one byte more is
// refused.
func TestBytesBoundsAreInclusive(t *testing.T) {
	cfg := testkit.StaticRules(testkit.ParseRules(t, "domain: d\nquota_buckets:\n  - bucket_id: {k: \"*\"}\n    rate_limit: {unit: minute, requests_per_unit: 100}\n"))
	id := func(c byte) map[string]string { return map[string]string{"k": strings.Repeat(string(c), 1000)} }
	cost := heldBytes(id('a'), canonical(id('a')))

	t.Run("stream", func(t *testing.T) {
		svc := New(Settings{Rules: cfg, Demand: memstore.NewDemand(), MaxStreamBytes: 2 * cost})
		a := openFake(t, svc)
		for _, c := range []byte{'a', 'b'} {
			a.in <- report("d", id(c), 1, time.Second)
			a.next(t)
		}
		if got := svc.held.Load(); got != 2*cost {
			t.Fatalf("held %d, want exactly the bound %d", got, 2*cost)
		}
		a.in <- report("d", id('c'), 1, time.Second)
		if err := ended(t, a); status.Code(err) != codes.ResourceExhausted {
			t.Errorf("past the stream's bound: %v, want ResourceExhausted", err)
		}
	})
	t.Run("total", func(t *testing.T) {
		svc := New(Settings{Rules: cfg, Demand: memstore.NewDemand(), MaxTotalBytes: 2 * cost})
		for _, c := range []byte{'a', 'b'} {
			f := openFake(t, svc)
			f.in <- report("d", id(c), 1, time.Second)
			f.next(t)
		}
		if got := svc.held.Load(); got != 2*cost {
			t.Fatalf("held %d, want exactly the bound %d", got, 2*cost)
		}
		f := openFake(t, svc)
		f.in <- report("d", id('c'), 1, time.Second)
		if err := ended(t, f); status.Code(err) != codes.ResourceExhausted {
			t.Errorf("past the total bound: %v, want ResourceExhausted", err)
		}
	})
}
