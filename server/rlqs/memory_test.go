package rlqs

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/store/memstore"
)

// TestHeldBytesMatchesTheHeap: what the byte bounds count for the bucket
// ids of a stream (Service.held, floodgate_quota_bucket_id_bytes) is
// within 2× of what holding those buckets takes on the heap, for short
// ids (where a bucket's bookkeeping weighs most) and long ones.
func TestHeldBytesMatchesTheHeap(t *testing.T) {
	cfg := testkit.StaticRules(testkit.ParseRules(t, "domain: d\nquota_buckets:\n  - bucket_id: {k: \"*\"}\n    rate_limit: {unit: minute, requests_per_unit: 100}\n"))
	for _, tc := range []struct {
		name  string
		value func(i int) string
	}{
		{"short ids", func(i int) string { return fmt.Sprintf("%08d", i) }},
		{"long ids", func(i int) string { return fmt.Sprintf("%0512d", i) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const buckets, perMsg = 4000, 200
			svc := New(Settings{Rules: cfg, Demand: memstore.NewDemand(), MaxStreamBytes: 1 << 40, MaxTotalBytes: 1 << 40, MaxBucketsPerStream: buckets + 1})
			a := openFake(t, svc)
			a.in <- report("d", map[string]string{"k": "warm-up"}, 1, time.Second)
			a.next(t)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			held0 := svc.held.Load()
			for i := 0; i < buckets; i += perMsg {
				m := &rlqsv3.RateLimitQuotaUsageReports{}
				for j := i; j < i+perMsg; j++ {
					m.BucketQuotaUsages = append(m.BucketQuotaUsages, &rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{
						BucketId: &rlqsv3.BucketId{Bucket: map[string]string{"k": tc.value(j)}}, NumRequestsAllowed: 1, TimeElapsed: durationpb.New(time.Second)})
				}
				a.in <- m
				a.next(t)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			heap := float64(after.HeapAlloc) - float64(before.HeapAlloc)
			counted := float64(svc.held.Load() - held0)
			t.Logf("%d buckets: heap %.0f bytes a bucket, counted %.0f", buckets, heap/buckets, counted/buckets)
			if counted < heap/2 || counted > heap*2 {
				t.Errorf("%d buckets take %.0f bytes of heap, counted %.0f: want within 2×", buckets, heap, counted)
			}
			runtime.KeepAlive(svc)
		})
	}
}
