package server_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/server"
)

const benchKeys = 10_000

// BenchmarkCheck is floodgate.v1 Check through a real gRPC client and
// server over bufconn, on the embedded store, over 10,000 distinct keys.
func BenchmarkCheck(b *testing.B) {
	h := start(b, nil, server.Settings{})
	reqs := make([]*floodgatev1.CheckRequest, benchKeys)
	seen := map[string]bool{}
	for i := range reqs {
		reqs[i] = &floodgatev1.CheckRequest{
			Key: "user:" + strconv.Itoa(i), Algorithm: floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET,
			Source: &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: 1 << 30, Period: durationpb.New(time.Second)}},
		}
		seen[reqs[i].Key] = true
	}
	if len(seen) != benchKeys {
		b.Fatalf("%d distinct keys, want %d", len(seen), benchKeys)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			resp, err := h.client.Check(context.Background(), reqs[i%benchKeys])
			if err != nil || !resp.Allowed {
				b.Errorf("got %v %v", resp, err)
				return
			}
			i += 7
		}
	})
}

// BenchmarkShouldRateLimit is Envoy's ShouldRateLimit through bufconn on
// the embedded store: one descriptor, 10,000 distinct values.
func BenchmarkShouldRateLimit(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(strconv.Itoa(n)+"descriptors", func(b *testing.B) {
			cfg := "domain: bench\ndescriptors:\n"
			for d := range n {
				cfg += "  - key: k" + strconv.Itoa(d) + "\n    rate_limit: {algorithm: token_bucket, unit: second, requests_per_unit: 1000000000}\n"
			}
			h := startEnvoy(b, cfg, nil, server.EnvoySettings{})
			reqs := make([]*rlsv3.RateLimitRequest, benchKeys)
			for i := range reqs {
				r := &rlsv3.RateLimitRequest{Domain: "bench"}
				for d := range n {
					r.Descriptors = append(r.Descriptors, &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k" + strconv.Itoa(d), Value: strconv.Itoa(i)}}})
				}
				reqs[i] = r
			}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					resp, err := h.client.ShouldRateLimit(context.Background(), reqs[i%benchKeys])
					if err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK {
						b.Errorf("got %v %v", resp, err)
						return
					}
					i += 7
				}
			})
		})
	}
}
