package rlqs

import (
	"runtime"
	"strconv"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/floodgate/floodgate/store/memstore"
)

const benchQuota = "domain: d\nquota_buckets:\n  - bucket_id: {b: \"*\"}\n    rate_limit: {unit: second, requests_per_unit: 1000}\n"

func benchReport(domain string, buckets int) *rlqsv3.RateLimitQuotaUsageReports {
	us := make([]*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage, buckets)
	for i := range us {
		us[i] = &rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{
			BucketId:           &rlqsv3.BucketId{Bucket: map[string]string{"b": strconv.Itoa(i)}},
			NumRequestsAllowed: 10, TimeElapsed: durationpb.New(time.Second),
		}
	}
	return &rlqsv3.RateLimitQuotaUsageReports{Domain: domain, BucketQuotaUsages: us}
}

// BenchmarkStreamMemory measures the service's own memory (Go heap after
// a GC; the gRPC transport's share is not included) for 1,000 streams each
// subscribed to the same 100 buckets (so 100 budgets of 1,000 reporters),
// with the embedded demand store: bytes per stream-bucket subscription.
// Run with -benchtime=1x.
func BenchmarkStreamMemory(b *testing.B) {
	const streams, buckets = 1000, 100
	for range b.N {
		svc, _ := newTestService(b, benchQuota, memstore.NewDemand())
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		cs := make([]*fakeClient, streams)
		for i := range cs {
			cs[i] = openFake(b, svc)
			// Read every response, as Envoy does, until the answer (an
			// assignment of every bucket) has come.
			got := make(chan struct{})
			go func(c *fakeClient, got chan struct{}) {
				n := 0
				for {
					select {
					case r := <-c.out:
						if n += len(r.GetBucketAction()); n >= buckets && got != nil {
							close(got)
							got = nil
						}
					case <-c.end:
						return
					}
				}
			}(cs[i], got)
			cs[i].in <- benchReport("d", buckets)
			<-got
		}
		time.Sleep(time.Second) // let pushes settle
		runtime.GC()
		runtime.ReadMemStats(&after)
		grown := float64(after.HeapAlloc) - float64(before.HeapAlloc)
		b.ReportMetric(grown/streams/buckets, "B/subscription")
		b.ReportMetric(grown/streams, "B/stream")
		for _, c := range cs {
			c.cancel()
			<-c.end
		}
	}
}

// BenchmarkReport is the service's CPU per bucket report: one stream
// reporting 100 buckets a message, each answered (embedded demand store).
func BenchmarkReport(b *testing.B) {
	const buckets = 100
	svc, _ := newTestService(b, benchQuota, memstore.NewDemand())
	c := openFake(b, svc)
	first := benchReport("d", buckets)
	c.in <- first
	c.next(b)
	msg := benchReport("", buckets)
	b.ResetTimer()
	for range b.N {
		c.in <- msg
		c.next(b)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/buckets, "ns/bucket-report")
}
