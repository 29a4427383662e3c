package tracing

import (
	"context"
	"log/slog"
	"strconv"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// cpuTime is the process' user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkTracing is Envoy's ShouldRateLimit through gRPC (bufconn, the
// real server with its interceptors) on the embedded store, one call at a
// time, with tracing off (no interceptor, no tracer), on with 1% of the
// traces sampled (parentbased_traceidratio 0.01, callers sending no trace
// context), and on with every trace sampled, for scale. Spans go through
// the batch processor to an exporter that discards them. cpu-ns/op is the
// whole process' CPU time per decision: the client's share included, so
// the server's relative cost is higher than the ratio of two of them.
func BenchmarkTracing(b *testing.B) {
	for _, tc := range []struct {
		name    string
		sampler string // "": tracing off
	}{
		{name: "off"},
		{name: "ratio=0.01", sampler: "parentbased_traceidratio"},
		{name: "always", sampler: "always_on"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tr := &Tracing{}
			if tc.sampler != "" {
				tr = New(tracetest.NewNoopExporter(), Config{Sampler: tc.sampler, SamplerArg: 0.01}, slog.New(slog.DiscardHandler))
				b.Cleanup(func() { tr.Shutdown(context.Background()) })
			}
			client := rlsv3.NewRateLimitServiceClient(serveEnvoy(b, tr))
			reqs := make([]*rlsv3.RateLimitRequest, 10_000)
			for i := range reqs {
				reqs[i] = &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{
					{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "user", Value: "u" + strconv.Itoa(i)}}},
				}}
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime(b)
			for i := range b.N {
				resp, err := client.ShouldRateLimit(ctx, reqs[(i*7)%len(reqs)])
				if err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK {
					b.Fatalf("got %v %v", resp, err)
				}
			}
			b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkTracingInterleaved measures the three setups of
// BenchmarkTracing in turns of 100 decisions each, so that a noisy
// machine's drift falls on all three alike. One op is one decision on
// each setup; it reports each setup's process CPU time per decision and
// the ratios of the traced ones to off.
func BenchmarkTracingInterleaved(b *testing.B) {
	setups := []struct {
		name    string
		sampler string
	}{
		{name: "off"},
		{name: "ratio0.01", sampler: "parentbased_traceidratio"},
		{name: "always", sampler: "always_on"},
	}
	clients := make([]rlsv3.RateLimitServiceClient, len(setups))
	for i, s := range setups {
		tr := &Tracing{}
		if s.sampler != "" {
			tr = New(tracetest.NewNoopExporter(), Config{Sampler: s.sampler, SamplerArg: 0.01}, slog.New(slog.DiscardHandler))
			b.Cleanup(func() { tr.Shutdown(context.Background()) })
		}
		clients[i] = rlsv3.NewRateLimitServiceClient(serveEnvoy(b, tr))
	}
	reqs := make([]*rlsv3.RateLimitRequest, 10_000)
	for i := range reqs {
		reqs[i] = &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "user", Value: "u" + strconv.Itoa(i)}}},
		}}
	}
	ctx := context.Background()
	cpu := make([]time.Duration, len(setups))
	const turn = 100
	b.ResetTimer()
	for done := 0; done < b.N; done += turn {
		n := min(turn, b.N-done)
		for s, client := range clients {
			start := cpuTime(b)
			for i := range n {
				resp, err := client.ShouldRateLimit(ctx, reqs[((done+i)*7)%len(reqs)])
				if err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK {
					b.Fatalf("%s: got %v %v", setups[s].name, resp, err)
				}
			}
			cpu[s] += cpuTime(b) - start
		}
	}
	for s := range setups {
		b.ReportMetric(float64(cpu[s])/float64(b.N), setups[s].name+"-cpu-ns/op")
	}
	b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "ratio0.01/off")
	b.ReportMetric(float64(cpu[2])/float64(cpu[0]), "always/off")
}
