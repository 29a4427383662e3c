package server_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/observability"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/store/memstore"
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

// benchEnvoyConfig is a domain with n token-bucket rules, k0 to k(n-1),
// that never deny.
func benchEnvoyConfig(n int) string {
	cfg := "domain: bench\ndescriptors:\n"
	for d := range n {
		cfg += "  - key: k" + strconv.Itoa(d) + "\n    rate_limit: {algorithm: token_bucket, unit: second, requests_per_unit: 1000000000}\n"
	}
	return cfg
}

// benchEnvoyRequests are benchKeys requests of n descriptors, k0=i to
// k(n-1)=i for i in 0..benchKeys-1.
func benchEnvoyRequests(n int) []*rlsv3.RateLimitRequest {
	reqs := make([]*rlsv3.RateLimitRequest, benchKeys)
	for i := range reqs {
		r := &rlsv3.RateLimitRequest{Domain: "bench"}
		for d := range n {
			r.Descriptors = append(r.Descriptors, &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k" + strconv.Itoa(d), Value: strconv.Itoa(i)}}})
		}
		reqs[i] = r
	}
	return reqs
}

// BenchmarkHealth is grpc.health.v1 Check through the same client, server
// and bufconn: the ceiling BenchmarkCheck and BenchmarkShouldRateLimit
// compare with (what the same server does for a call that decides
// nothing).
func BenchmarkHealth(b *testing.B) {
	h := start(b, nil, server.Settings{})
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := h.health.Check(context.Background(), &healthpb.HealthCheckRequest{})
			if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
				b.Errorf("got %v %v", resp, err)
				return
			}
		}
	})
}

// BenchmarkShouldRateLimit is Envoy's ShouldRateLimit through bufconn on
// the embedded store: one descriptor, 10,000 distinct values.
func BenchmarkShouldRateLimit(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(strconv.Itoa(n)+"descriptors", func(b *testing.B) {
			h := startEnvoy(b, benchEnvoyConfig(n), nil, server.EnvoySettings{})
			reqs := benchEnvoyRequests(n)
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

// BenchmarkShouldRateLimitHandler is the server's own work on one
// ShouldRateLimit, without gRPC: the handler on the embedded store with
// metrics and headers on, then the response's marshalling (what grpc-go
// does with it next). Its allocs/op are the handler's alone.
func BenchmarkShouldRateLimitHandler(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(strconv.Itoa(n)+"descriptors", func(b *testing.B) {
			cfg, err := rules.Parse("bench.yaml", []byte(benchEnvoyConfig(n)))
			if err != nil {
				b.Fatal(err)
			}
			st := memstore.New(memstore.Config{})
			b.Cleanup(func() { st.Close() })
			e := server.NewEnvoy(st, server.EnvoySettings{Settings: server.Settings{Rules: testkit.StaticRules(cfg), Metrics: observability.NewMetrics(nil)}})
			reqs := benchEnvoyRequests(n)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				resp, err := e.ShouldRateLimit(ctx, reqs[(i*7)%benchKeys])
				if err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK || len(resp.Statuses) != n || len(resp.ResponseHeadersToAdd) == 0 {
					b.Fatalf("got %v %v", resp, err)
				}
				if _, err := proto.Marshal(resp); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCheckHandler is BenchmarkShouldRateLimitHandler's counterpart
// for floodgate.v1 Check with an inline limit.
func BenchmarkCheckHandler(b *testing.B) {
	st := memstore.New(memstore.Config{})
	b.Cleanup(func() { st.Close() })
	r := server.NewRateLimiter(st, server.CheckSettings{Settings: server.Settings{Metrics: observability.NewMetrics(nil)}})
	reqs := make([]*floodgatev1.CheckRequest, benchKeys)
	for i := range reqs {
		reqs[i] = &floodgatev1.CheckRequest{
			Key: "user:" + strconv.Itoa(i), Algorithm: floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET,
			Source: &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: 1 << 30, Period: durationpb.New(time.Second)}},
		}
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		resp, err := r.Check(ctx, reqs[(i*7)%benchKeys])
		if err != nil || !resp.Allowed {
			b.Fatalf("got %v %v", resp, err)
		}
		if _, err := proto.Marshal(resp); err != nil {
			b.Fatal(err)
		}
	}
}
